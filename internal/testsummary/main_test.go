package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// events feeds evs to a new summary, closes it and returns it with what it
// wrote.
func events(t *testing.T, evs ...event) (*summary, string) {
	t.Helper()
	var b strings.Builder
	s := newSummary(&b)
	for _, e := range evs {
		// Round-trip through JSON, as the real input arrives.
		j, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		var d event
		if err := json.Unmarshal(j, &d); err != nil {
			t.Fatal(err)
		}
		s.add(d)
	}
	s.close()
	return s, b.String()
}

func TestSummaryCounts(t *testing.T) {
	s, out := events(t,
		event{Action: "start", Package: "m/a"},
		event{Action: "run", Package: "m/a", Test: "TestOK"},
		event{Action: "output", Package: "m/a", Test: "TestOK", Output: "=== RUN   TestOK\n"},
		event{Action: "pass", Package: "m/a", Test: "TestOK"},
		event{Action: "run", Package: "m/a", Test: "TestBad"},
		event{Action: "output", Package: "m/a", Test: "TestBad", Output: "    a_test.go:9: want 1, got 2\n"},
		event{Action: "run", Package: "m/a", Test: "TestBad/sub"},
		event{Action: "pass", Package: "m/a", Test: "TestBad/sub"},
		event{Action: "fail", Package: "m/a", Test: "TestBad"},
		event{Action: "output", Package: "m/a", Test: "TestSkip", Output: "=== RUN   TestSkip\n"},
		event{Action: "output", Package: "m/a", Test: "TestSkip", Output: "    a_test.go:20: needs a GPU\n"},
		event{Action: "output", Package: "m/a", Test: "TestSkip", Output: "--- SKIP: TestSkip (0.00s)\n"},
		event{Action: "skip", Package: "m/a", Test: "TestSkip"},
		event{Action: "output", Package: "m/a", Output: "FAIL\n"},
		event{Action: "output", Package: "m/a", Output: "FAIL\tm/a\t0.1s\n"},
		event{Action: "fail", Package: "m/a"},
		event{Action: "start", Package: "m/b"},
		event{Action: "output", Package: "m/b", Output: "?   \tm/b\t[no test files]\n"},
		event{Action: "skip", Package: "m/b"},
	)
	if s.pass != 2 || s.fail != 1 || s.skip != 1 || s.pkgFail != 1 || s.pkgNoTests != 1 || s.pkgOK != 0 {
		t.Errorf("counts: %+v", *s)
	}
	if !s.failed() {
		t.Error("a failed test did not fail the run")
	}
	for _, want := range []string{"want 1, got 2", "FAIL\tm/a", "[no test files]", "skipped: m/a TestSkip: a_test.go:20: needs a GPU\n", "packages: 0 ok, 1 failed, 1 without tests\n", "tests: 2 passed, 1 failed, 1 skipped\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if strings.Contains(out, "=== RUN   TestOK") {
		t.Error("a passing test's output was printed")
	}
	if strings.HasSuffix(strings.TrimSpace(out), "FAIL") || strings.Contains(out, "\nFAIL\n") {
		t.Error("the bare FAIL line was printed")
	}
}

func TestSummaryPassAndEmpty(t *testing.T) {
	ok, okOut := events(t,
		event{Action: "start", Package: "m/a"},
		event{Action: "pass", Package: "m/a", Test: "TestOK"},
		event{Action: "output", Package: "m/a", Output: "ok  \tm/a\t0.1s\n"},
		event{Action: "pass", Package: "m/a"},
	)
	if ok.failed() || ok.pkgOK != 1 || !strings.Contains(okOut, "ok  \tm/a") {
		t.Errorf("a passing run: failed=%v %+v", ok.failed(), *ok)
	}
	if empty, _ := events(t); !empty.failed() {
		t.Error("a run with no test passed")
	}
	bf, bfOut := events(t,
		event{Action: "build-output", ImportPath: "m/c", Output: "c.go:1: syntax error\n"},
		event{Action: "build-fail", ImportPath: "m/c"},
		event{Action: "pass", Package: "m/a", Test: "TestOK"},
	)
	if !bf.failed() || !strings.Contains(bfOut, "syntax error") {
		t.Errorf("a build failure: failed=%v, output %q", bf.failed(), bfOut)
	}
}

func TestProgress(t *testing.T) {
	s := newSummary(&strings.Builder{})
	s.add(event{Action: "start", Package: "m/store"})
	s.add(event{Action: "start", Package: "m/adapter"})
	s.add(event{Action: "pass", Package: "m/adapter"})
	if p := s.progress(s.running["m/store"]); !strings.Contains(p, "1 packages done") || !strings.Contains(p, "running: store") {
		t.Errorf("progress %q", p)
	}
}

// TestScriptUsesSummary: the test command never reuses cached results and
// ends with the summary's count (it would pass silently on a cached run
// and end on a bare "ok" line otherwise).
func TestScriptUsesSummary(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "scripts", "test.sh"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"go test -json -count=1", "./internal/testsummary", "pipefail"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("scripts/test.sh lacks %q", want)
		}
	}
	ci, err := os.ReadFile(filepath.Join("..", "..", ".ci", "run"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(ci), "exec bash scripts/test.sh\n") {
		t.Errorf(".ci/run does not call exactly scripts/test.sh:\n%s", ci)
	}
}
