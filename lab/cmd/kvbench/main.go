// Command kvbench measures kvstore against its peers (plain files, Pebble,
// Badger and bbolt) on the same synthetic bf16 KV packets, in one run: Put,
// Get (warm and cold) and Assemble, the stores interleaved run by run. It is
// apart from the kvstore command so that kvstore links none of the peers.
//
// Usage:
//
//	kvbench [flags]
//
// Exit codes:
//
//	0  success
//	1  the measurement failed (a store returned an error, no scratch space)
//	2  bad usage: bad flag or argument
//
// The flags are listed by kvbench --help; docs/cli.md and BENCHMARKS.md
// show the runs the project keeps.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
)

// Exit codes, documented in the package comment.
const (
	exitOK    = 0
	exitFail  = 1
	exitUsage = 2
)

// errUsage marks an error as bad usage (exit code 2).
var errUsage = errors.New("usage")

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// run is main without the process exit, so tests can call it too.
func run(args []string, stdout, stderr io.Writer) int {
	err := measure(args, stdout, stderr)
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return exitOK
	case errors.Is(err, errUsage):
		fmt.Fprintf(stderr, "kvbench: %v\n", err)
		return exitUsage
	}
	fmt.Fprintf(stderr, "kvbench: %v\n", err)
	return exitFail
}
