package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// inputs writes a small TSV and notes file into a temporary directory and
// returns the flags that name them and the output.
func inputs(t *testing.T) (dir string, flags []string) {
	t.Helper()
	dir = t.TempDir()
	tsv := header + tsvRow("Store", "Put", "`go test`", "Put vs file", "**0.90x plain**", ">= 0.95x plain", "not met", "2026-01-01", "0000000", "store:BenchmarkPutPaired:x-plain", ">=0.95")
	for name, text := range map[string]string{"in.tsv": tsv, "notes.md": "## Methods\n\nm\n", "bench.txt": benchOutput} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir, []string{"-in", filepath.Join(dir, "in.tsv"), "-notes", filepath.Join(dir, "notes.md"), "-out", filepath.Join(dir, "OUT.md")}
}

func TestRunWritesAndChecks(t *testing.T) {
	dir, flags := inputs(t)
	var stderr bytes.Buffer
	if code := run(append(flags, "-check"), &stderr); code != exitFail {
		t.Fatalf("-check with no output file: exit %d, want %d", code, exitFail)
	}
	if code := run(flags, &stderr); code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if code := run(append(flags, "-check"), &stderr); code != exitOK {
		t.Fatalf("-check after writing: exit %d: %s", code, stderr.String())
	}
	out := filepath.Join(dir, "OUT.md")
	if err := os.WriteFile(out, []byte("edited by hand\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	stderr.Reset()
	if code := run(append(flags, "-check"), &stderr); code != exitFail || !strings.Contains(stderr.String(), "differs") {
		t.Fatalf("-check after a hand edit: exit %d, %q", code, stderr.String())
	}
}

func TestRunUpdatesFromBenchOutput(t *testing.T) {
	dir, flags := inputs(t)
	var stderr bytes.Buffer
	bench := filepath.Join(dir, "bench.txt")
	if code := run(append(flags, bench), &stderr); code != exitUsage {
		t.Fatalf("bench output without -date and -commit: exit %d, want %d", code, exitUsage)
	}
	if code := run(append(flags, "-date", "2026-12-02", "-commit", "a485253", bench), &stderr); code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	tsv, err := os.ReadFile(filepath.Join(dir, "in.tsv"))
	if err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join(dir, "OUT.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"**median 1.05x plain** (0.97-1.15, 3 runs)\t>= 0.95x plain\tmet (median)\t2026-12-02\ta485253"} {
		if !strings.Contains(string(tsv), want) {
			t.Errorf("the TSV lacks %q:\n%s", want, tsv)
		}
	}
	if !strings.Contains(string(md), "| **median 1.05x plain** (0.97-1.15, 3 runs) | >= 0.95x plain | met (median) | 2026-12-02, `a485253` |") {
		t.Errorf("BENCHMARKS lacks the updated row:\n%s", md)
	}
	// Output that names no row's benchmark is refused, and changes nothing.
	other := filepath.Join(dir, "other.txt")
	if err := os.WriteFile(other, []byte("pkg: github.com/kvstore/kvstore/codec\nBenchmarkDecode 10 1.0 x_memcpy\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code := run(append(flags, "-date", "2026-12-03", "-commit", "bc0f0bc", other), &stderr); code != exitFail {
		t.Fatalf("bench output of no row: exit %d, want %d", code, exitFail)
	}
	after, _ := os.ReadFile(filepath.Join(dir, "in.tsv"))
	if !bytes.Equal(after, tsv) {
		t.Fatal("a refused update changed the TSV")
	}
}
