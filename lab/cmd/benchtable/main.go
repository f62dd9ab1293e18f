// Command benchtable writes BENCHMARKS.md from its input, so that the file
// holds exactly the figures its input records:
//
//   - docs/benchmarks.tsv: one row per benchmark figure (area, benchmark,
//     command, what is compared, figure, target, status, date, commit,
//     metric, goal), tab-separated under a header line;
//   - docs/benchmarks.notes.md: the prose, a "Methods" section and a
//     section of notes for any area, printed under that area's table.
//
// Given `go test -bench` output files as arguments, it first updates every
// row whose metric column names a benchmark metric found in them (the
// figure becomes that metric's median, range and count; the status is read
// from the row's goal; the date and commit are the -date and -commit flags)
// and writes the updated rows back to the TSV file.
//
// Usage, from the repository root:
//
//	go run ./lab/cmd/benchtable                 # regenerate BENCHMARKS.md
//	go run ./lab/cmd/benchtable -check          # exit 1 when it differs
//	go run ./lab/cmd/benchtable -date 2026-12-02 -commit a485253 bench.txt...
//
// Exit codes:
//
//	0  success (with -check: BENCHMARKS.md matches its input)
//	1  an input is malformed, a file cannot be read or written, a bench
//	   output updates no row, or (with -check) BENCHMARKS.md differs
//	2  bad usage: bad flag, bench output without -date and -commit
package main

import (
	"bytes"
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

// errStale is -check's finding: BENCHMARKS.md is not what its input gives.
var errStale = errors.New("BENCHMARKS.md differs from its input")

func main() { os.Exit(run(os.Args[1:], os.Stderr)) }

// run is main without the process exit, so tests can call it too.
func run(args []string, stderr io.Writer) int {
	err := benchtable(args, stderr)
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return exitOK
	case errors.Is(err, errUsage):
		fmt.Fprintf(stderr, "benchtable: %v\n", err)
		return exitUsage
	}
	fmt.Fprintf(stderr, "benchtable: %v\n", err)
	return exitFail
}

// benchtable parses the flags and does the work run reports on.
func benchtable(args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("benchtable", flag.ContinueOnError)
	fs.SetOutput(stderr)
	in := fs.String("in", "docs/benchmarks.tsv", "the rows: one benchmark figure per line")
	notes := fs.String("notes", "docs/benchmarks.notes.md", "the prose: Methods and per-area notes")
	out := fs.String("out", "BENCHMARKS.md", "the file to write")
	check := fs.Bool("check", false, "write nothing; fail when -out differs from what the input gives")
	date := fs.String("date", "", "with bench output: the date the figures were measured (YYYY-MM-DD)")
	commit := fs.String("commit", "", "with bench output: the commit whose code they measure")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	rows, err := readRowsFile(*in)
	if err != nil {
		return err
	}
	if fs.NArg() > 0 {
		if *check {
			return fmt.Errorf("%w: -check takes no bench output", errUsage)
		}
		if err := checkProvenance(*date, *commit); err != nil {
			return fmt.Errorf("%w: %v", errUsage, err)
		}
		if rows, err = updateFromFiles(rows, fs.Args(), *date, *commit, stderr); err != nil {
			return err
		}
		if err := writeRowsFile(*in, rows); err != nil {
			return err
		}
	}
	text, err := os.ReadFile(*notes)
	if err != nil {
		return err
	}
	md, err := Render(rows, string(text))
	if err != nil {
		return fmt.Errorf("%s, %s: %w", *in, *notes, err)
	}
	if *check {
		old, err := os.ReadFile(*out)
		if err != nil {
			return err
		}
		if !bytes.Equal(old, md) {
			return fmt.Errorf("%w (%s): run go run ./lab/cmd/benchtable", errStale, firstDifference(old, md))
		}
		return nil
	}
	return os.WriteFile(*out, md, 0o644)
}

// firstDifference names the first line where two texts differ.
func firstDifference(a, b []byte) string {
	la, lb := bytes.Split(a, []byte("\n")), bytes.Split(b, []byte("\n"))
	for i := range min(len(la), len(lb)) {
		if !bytes.Equal(la[i], lb[i]) {
			return fmt.Sprintf("line %d: have %.80q, want %.80q", i+1, la[i], lb[i])
		}
	}
	return fmt.Sprintf("%d lines, want %d", len(la), len(lb))
}
