package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// Exit codes, documented in the package comment.
const (
	exitOK          = 0
	exitFail        = 1
	exitUsage       = 2
	exitInterrupted = 130
)

// errUsage marks an error as bad usage (exit code 2).
var errUsage = errors.New("usage")

// env is what every verb gets: the global flags and the output streams.
type env struct {
	dir    string
	create bool // --create: make a new store when --dir holds none
	json   bool
	stdout io.Writer
	stderr io.Writer
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop() // the first signal cancels; a second one kills at once
	}()
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run runs kvtrain with args and returns its exit code; a cancelled ctx
// (a signal) stops the verb, which then exits with exitInterrupted. It is
// main without the signals and the process exit, so tests can call it.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	e := &env{stdout: stdout, stderr: stderr}
	ran := false // whether a verb's body ran: errors before it are usage
	root := newRoot(e, &ran)
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	cmd, err := root.ExecuteContextC(ctx)
	name := cmd.CommandPath()
	switch {
	case err == nil:
		return exitOK
	case ran && ctx.Err() != nil:
		fmt.Fprintf(stderr, "interrupted: %s: %v\n", name, err)
		return exitInterrupted
	case !ran || errors.Is(err, errUsage):
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		fmt.Fprintf(stderr, "run '%s --help' for usage\n", name)
		return exitUsage
	}
	fmt.Fprintf(stderr, "%s: %v\n", name, err)
	return exitFail
}

// newRoot builds the command tree; *ran is set when a verb's body runs.
func newRoot(e *env, ran *bool) *cobra.Command {
	root := &cobra.Command{
		Use:   "kvtrain",
		Short: "train what kvstore serves (KV Packet adapters, span-memory routers) and store it",
		Long: `kvtrain trains what kvstore serves and stores it: "kvtrain adapter" trains
a KV Packet adapter on a llama2.c checkpoint, "kvtrain router" SeKV's
span-memory routers, "kvtrain rankgate" SeKV's rank gate. Flags may come
before or after the command.

Exit codes: 0 success, 1 failure, 2 bad usage, 130 interrupted (SIGINT or
SIGTERM; nothing stored; router and rankgate save their checkpoints).`,
		SilenceErrors: true,
		SilenceUsage:  true,
		Args:          cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			return fmt.Errorf("%w: no command given", errUsage)
		},
	}
	pf := root.PersistentFlags()
	pf.StringVar(&e.dir, "dir", "", "store directory (required)")
	pf.BoolVar(&e.create, "create", false, "create the store when --dir holds none")
	pf.BoolVar(&e.json, "json", false, "print the report as JSON")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return fmt.Errorf("%w: %v", errUsage, err) })
	root.AddCommand(adapterCommand(e, ran))
	root.AddCommand(routerCommand(e, ran))
	root.AddCommand(rankgateCommand(e, ran))
	return root
}

// verb is a kvtrain subcommand with f's flags whose body is run; *ran is
// set when the body runs.
func verb(use, short, long string, f interface{ define(*pflag.FlagSet) }, ran *bool, run func(context.Context) error) *cobra.Command {
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Long:  long,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			*ran = true
			return run(cmd.Context())
		},
	}
	f.define(cmd.Flags())
	return cmd
}
