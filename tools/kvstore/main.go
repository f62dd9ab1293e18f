// Command kvstore inspects, verifies and maintains kvstore stores, and runs
// a demo of the engine on an embedded default.
//
// Usage:
//
//	kvstore [--dir DIR] [--json] <command> [flags] [args]
//
// Exit codes:
//
//	0  success (and, for verify and check, nothing found)
//	1  the operation failed, or verify/check found corruption or inconsistencies
//	2  bad usage: unknown command, bad flag or argument
//
// Each command prints its own help with --help.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

// Exit codes, documented in the package comment and in --help.
const (
	exitOK    = 0
	exitFail  = 1
	exitUsage = 2
)

// errUsage marks an error as bad usage (exit code 2).
var errUsage = errors.New("usage")

// env is what every command gets: the global flags and the output streams.
type env struct {
	dir    string
	json   bool
	stdout io.Writer
	stderr io.Writer
}

// command is one verb of the CLI.
type command struct {
	name    string
	summary string
	// run parses args with its own FlagSet (created by newFlags) and runs.
	run func(e *env, args []string) error
}

var commands = map[string]*command{}

func register(c *command) { commands[c.name] = c }

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// run is main without the process exit, so tests can call it too.
func run(args []string, stdout, stderr io.Writer) int {
	e := &env{stdout: stdout, stderr: stderr}
	global := flag.NewFlagSet("kvstore", flag.ContinueOnError)
	global.SetOutput(stderr)
	global.StringVar(&e.dir, "dir", "", "store directory")
	global.BoolVar(&e.json, "json", false, "print machine-readable JSON")
	global.Usage = func() { usage(stderr) }
	if err := global.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	rest := global.Args()
	if len(rest) == 0 {
		usage(stderr)
		return exitUsage
	}
	if rest[0] == "help" {
		usage(stdout)
		return exitOK
	}
	c, ok := commands[rest[0]]
	if !ok {
		fmt.Fprintf(stderr, "kvstore: unknown command %q\n\n", rest[0])
		usage(stderr)
		return exitUsage
	}
	err := c.run(e, rest[1:])
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, flag.ErrHelp):
		return exitOK
	case errors.Is(err, errUsage):
		fmt.Fprintf(stderr, "kvstore %s: %v\n", c.name, err)
		return exitUsage
	}
	fmt.Fprintf(stderr, "kvstore %s: %v\n", c.name, err)
	return exitFail
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: kvstore [--dir DIR] [--json] <command> [flags] [args]")
	fmt.Fprintln(w, "\ncommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-10s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(w, "\nexit codes: 0 success, 1 failure or findings (verify, check), 2 bad usage")
	fmt.Fprintln(w, "run 'kvstore <command> --help' for a command's flags")
}

// newFlags returns a FlagSet for command c whose errors are usage errors.
func newFlags(e *env, name, args, summary string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	fs.Usage = func() {
		fmt.Fprintf(e.stderr, "usage: kvstore %s %s\n\n%s\n", name, args, summary)
		var b strings.Builder
		fs.SetOutput(&b)
		fs.PrintDefaults()
		fs.SetOutput(e.stderr)
		if b.Len() > 0 {
			fmt.Fprintf(e.stderr, "\nflags:\n%s", b.String())
		}
	}
	return fs
}

// parse parses args and turns flag errors into usage errors.
func parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	return nil
}
