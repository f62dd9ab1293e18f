// Command testsummary reads `go test -json` on standard input and writes
// what a person watching a long test run needs: each package's result line
// as it finishes (ok, FAIL, no test files), the whole output of every test
// that failed and of every build that failed, a line every --every saying
// how many packages are done and which are still running, and at the end
// every skipped test with its reason, and the count of packages and of
// tests (subtests included):
//
//	packages: 52 ok, 0 failed, 6 without tests
//	tests: 3120 passed, 0 failed, 14 skipped
//
// It exits 1 when a test, a package or a build failed, or when the input
// held no test at all, and 2 when the input is not test2json.
//
// Usage: go test -json ./... | go run ./internal/testsummary [--every 60s]
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"
)

// event is one line of test2json's output.
type event struct {
	Action     string
	Package    string
	Test       string
	Output     string
	ImportPath string
}

// summary accumulates the run.
type summary struct {
	out                        io.Writer
	buffers                    map[string]*strings.Builder // (package, test) -> output so far
	running                    map[string]time.Time        // packages started, not finished
	done                       int
	pkgOK, pkgFail, pkgNoTests int
	pass, fail, skip           int
	buildFail                  bool
	skipped                    []string // "package TestName: reason" of every skipped test
}

func newSummary(out io.Writer) *summary {
	return &summary{out: out, buffers: map[string]*strings.Builder{}, running: map[string]time.Time{}}
}

// add takes one event.
func (s *summary) add(e event) {
	key := e.Package + "\x00" + e.Test
	switch {
	case e.Action == "build-output":
		fmt.Fprint(s.out, e.Output)
	case e.Action == "build-fail":
		s.buildFail = true
	case e.Action == "start" && e.Test == "":
		s.running[e.Package] = time.Now()
	case e.Test == "" && e.Action == "output":
		// The package's own lines: its result ("ok ...", "FAIL ...", "?
		// ... [no test files]") and anything printed outside a test (a
		// panic in TestMain, a timeout). The bare PASS/FAIL that the test
		// binary prints before the result line is left out.
		if o := strings.TrimSpace(e.Output); o != "PASS" && o != "FAIL" {
			fmt.Fprint(s.out, e.Output)
		}
	case e.Test == "" && (e.Action == "pass" || e.Action == "fail" || e.Action == "skip"):
		delete(s.running, e.Package)
		s.done++
		switch e.Action {
		case "pass":
			s.pkgOK++
		case "fail":
			s.pkgFail++
		case "skip":
			s.pkgNoTests++
		}
	case e.Action == "output":
		b := s.buffers[key]
		if b == nil {
			b = &strings.Builder{}
			s.buffers[key] = b
		}
		b.WriteString(e.Output)
	case e.Action == "pass" || e.Action == "skip" || e.Action == "fail":
		switch e.Action {
		case "pass":
			s.pass++
		case "skip":
			s.skip++
			s.skipped = append(s.skipped, e.Package+" "+e.Test+": "+skipReason(s.buffers[key]))
		case "fail":
			s.fail++
			if b := s.buffers[key]; b != nil {
				fmt.Fprint(s.out, b.String())
			}
		}
		delete(s.buffers, key)
	}
}

// skipReason is the last line a skipped test printed before its "---
// SKIP" line: the reason it gave t.Skip, with the file and line.
func skipReason(b *strings.Builder) string {
	if b == nil {
		return "(no reason printed)"
	}
	reason := "(no reason printed)"
	for line := range strings.Lines(b.String()) {
		l := strings.TrimSpace(line)
		if l == "" || strings.HasPrefix(l, "=== ") || strings.HasPrefix(l, "--- SKIP") {
			continue
		}
		reason = l
	}
	return reason
}

// progress is the line printed every --every.
func (s *summary) progress(start time.Time) string {
	names := make([]string, 0, len(s.running))
	for p := range s.running {
		names = append(names, p[strings.LastIndex(p, "/")+1:])
	}
	slices.Sort(names)
	return fmt.Sprintf("== %d packages done, %d tests passed, %d failed so far; running: %s (%s)",
		s.done, s.pass, s.fail, strings.Join(names, " "), time.Since(start).Round(time.Second))
}

// failed says whether the run failed.
func (s *summary) failed() bool {
	return s.fail > 0 || s.pkgFail > 0 || s.buildFail || s.pass+s.fail+s.skip == 0
}

// close writes the closing count.
func (s *summary) close() {
	for _, sk := range s.skipped {
		fmt.Fprintf(s.out, "skipped: %s\n", sk)
	}
	fmt.Fprintf(s.out, "packages: %d ok, %d failed, %d without tests\n", s.pkgOK, s.pkgFail, s.pkgNoTests)
	fmt.Fprintf(s.out, "tests: %d passed, %d failed, %d skipped\n", s.pass, s.fail, s.skip)
}

func main() {
	every := flag.Duration("every", time.Minute, "how often to say what is still running (0: never)")
	flag.Parse()
	s := newSummary(os.Stdout)
	lines := make(chan []byte)
	errc := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(os.Stdin)
		sc.Buffer(make([]byte, 1<<20), 64<<20)
		for sc.Scan() {
			lines <- slices.Clone(sc.Bytes())
		}
		errc <- sc.Err()
		close(lines)
	}()
	start := time.Now()
	var tick <-chan time.Time
	if *every > 0 {
		t := time.NewTicker(*every)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-tick:
			fmt.Fprintln(os.Stderr, s.progress(start))
			continue
		case line, ok := <-lines:
			if !ok {
				if err := <-errc; err != nil {
					fmt.Fprintln(os.Stderr, "testsummary:", err)
					os.Exit(2)
				}
				s.close()
				if s.failed() {
					os.Exit(1)
				}
				return
			}
			var e event
			if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &e) != nil {
				// go test prints some lines (a build error of a package
				// that is not under test, go vet's findings) as plain text.
				fmt.Fprintf(s.out, "%s\n", line)
				continue
			}
			s.add(e)
		}
	}
}
