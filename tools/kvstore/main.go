// Command kvstore inspects, verifies and maintains kvstore stores, and runs
// a demo of the engine on an embedded default.
//
// Usage:
//
//	kvstore <command> [flags] [args]
//
// Flags may come before or after the command and its arguments; --dir and
// --json are global. --help prints to stdout, --version (or the version
// command) prints the module version and VCS revision, and
// "kvstore completion bash|zsh|fish|powershell" prints a completion script.
//
// Exit codes:
//
//	0    success (and, for verify and check, nothing found)
//	1    the operation failed, or verify/check found corruption or inconsistencies
//	2    bad usage: unknown command, bad flag or argument
//	130  interrupted by SIGINT or SIGTERM: the verb stopped and cleaned up
//
// The parser is cobra (with pflag), as bbolt's and pebble's tools use.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"syscall"
	"time"

	"github.com/kvstore/kvstore/store"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// Exit codes, documented in the package comment and in --help.
const (
	exitOK          = 0
	exitFail        = 1
	exitUsage       = 2
	exitInterrupted = 130
)

// errUsage marks an error as bad usage (exit code 2).
var errUsage = errors.New("usage")

// env is what every command gets: the global flags and the output streams.
type env struct {
	dir    string
	json   bool
	addr   string // --addr of the read verbs: a live store's admin handler
	create bool   // --create: the verbs that add data may create the store
	// lockWait is --lock-wait: how long a verb that writes waits for the
	// store's lock (store.Options.LockWait).
	lockWait time.Duration
	stdout   io.Writer
	stderr   io.Writer
}

// verbFunc runs a verb after its flags are parsed; args are the positional
// arguments.
type verbFunc func(ctx context.Context, e *env, args []string) error

// command is one verb of the CLI.
type command struct {
	name    string
	args    string // positional arguments, for the usage line
	summary string // one line, in the command list
	long    string // the verb's --help text
	// setup defines the verb's own flags on fs and returns its body.
	setup func(fs *pflag.FlagSet, e *env) verbFunc
	// sub are the verb's sub-verbs (adapter import|export|ls); a verb
	// with sub-verbs has no setup.
	sub []*command
	// moved, when not "", is where a verb that left the CLI went: the
	// verb is hidden, accepts any flags and fails with a usage error
	// naming it.
	moved string
}

var commands = map[string]*command{}

func register(c *command) { commands[c.name] = c }

// noFlags is setup for a verb without flags of its own.
func noFlags(f verbFunc) func(*pflag.FlagSet, *env) verbFunc {
	return func(*pflag.FlagSet, *env) verbFunc { return f }
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := runContext(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run is main without the signals and the process exit, so tests can call it.
func run(args []string, stdout, stderr io.Writer) int {
	return runContext(context.Background(), args, stdout, stderr)
}

// runContext runs the CLI with args; a cancelled ctx (a signal) stops the
// verb, which then exits with exitInterrupted.
func runContext(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	e := &env{stdout: stdout, stderr: stderr}
	var ran *command // the verb whose body ran; nil while parsing
	root := newRoot(e, &ran)
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	cmd, err := root.ExecuteContextC(ctx)
	name := cmd.CommandPath()
	switch {
	case err == nil:
		return exitOK
	case ran != nil && ctx.Err() != nil:
		fmt.Fprintf(stderr, "interrupted: %s: %v\n", name, err)
		return exitInterrupted
	case ran == nil || errors.Is(err, errUsage):
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		fmt.Fprintf(stderr, "run '%s --help' for usage\n", name)
		return exitUsage
	}
	fmt.Fprintf(stderr, "%s: %v\n", name, err)
	if errors.Is(err, store.ErrLocked) {
		fmt.Fprintln(stderr, lockedHint(cmd))
	}
	return exitFail
}

// lockedHint is what to do about a store another process holds (the
// error names it where the OS says): ask that process, a live store, over
// --addr when the verb can; else stop it first.
func lockedHint(cmd *cobra.Command) string {
	const serve = "a program serving the store can mount its admin handler (package store/admin) on HTTP"
	if cmd.Flags().Lookup("addr") != nil {
		return fmt.Sprintf("hint: another process has the store open; if it is a live store, ask it instead of the directory:\n"+
			"  %s --addr http://HOST:PORT/PREFIX   (%s)", cmd.CommandPath(), serve)
	}
	return "hint: another process has the store open; stop it (or make the change through it) and run again.\n" +
		"  Read verbs (ls, stat, inspect, verify, check) can ask a live store with --addr URL (" + serve + ")"
}

// newRoot builds the command tree; *ran is set to the verb whose body runs.
func newRoot(e *env, ran **command) *cobra.Command {
	root := &cobra.Command{
		Use:   "kvstore",
		Short: "inspect, verify and maintain kvstore stores",
		Long: `kvstore inspects, verifies and maintains kvstore stores, and runs a demo
of the engine. Flags may come before or after the command.

Exit codes: 0 success, 1 failure or findings (verify, check), 2 bad usage,
130 interrupted (SIGINT or SIGTERM).`,
		Version:       version(),
		SilenceErrors: true,
		SilenceUsage:  true,
		Args:          cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return fmt.Errorf("%w: no command given", errUsage)
		},
	}
	root.SetVersionTemplate("{{.Version}}\n")
	pf := root.PersistentFlags()
	pf.StringVar(&e.dir, "dir", "", "store directory")
	pf.BoolVar(&e.json, "json", false, "print machine-readable JSON (exact byte counts)")
	pf.BoolVar(&e.create, "create", false, "let import and adapter import create the store when --dir holds none (other verbs never create one)")
	pf.DurationVar(&e.lockWait, "lock-wait", 10*time.Second, "how long a verb that writes waits for the store while others hold it open (read-only opens arriving meanwhile are refused, so they cannot starve it); 0 fails at once")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return fmt.Errorf("%w: %v", errUsage, err) })
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		root.AddCommand(newCommand(e, commands[n], ran))
	}
	return root
}

// newCommand turns c into a cobra command.
func newCommand(e *env, c *command, ran **command) *cobra.Command {
	use := c.name
	if c.args != "" {
		use += " " + c.args
	}
	cmd := &cobra.Command{Use: use, Short: c.summary, Long: c.long}
	if len(c.sub) > 0 {
		cmd.Args = cobra.NoArgs
		cmd.RunE = func(*cobra.Command, []string) error {
			return fmt.Errorf("%w: %s needs a sub-command", errUsage, c.name)
		}
		for _, s := range c.sub {
			cmd.AddCommand(newCommand(e, s, ran))
		}
		return cmd
	}
	if c.moved != "" {
		cmd.Hidden = true
		cmd.FParseErrWhitelist.UnknownFlags = true
		cmd.RunE = func(cmd *cobra.Command, _ []string) error {
			return fmt.Errorf("%w: moved: use %s", errUsage, c.moved)
		}
		return cmd
	}
	body := c.setup(cmd.Flags(), e)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		*ran = c
		return body(cmd.Context(), e, args)
	}
	return cmd
}

// noArgs refuses positional arguments.
func noArgs(args []string) error {
	if len(args) > 0 {
		return fmt.Errorf("%w: unexpected arguments %q", errUsage, args)
	}
	return nil
}
