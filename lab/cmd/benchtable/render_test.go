package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// root is the repository root, from this package's directory.
var root = filepath.Join("..", "..", "..")

// TestBenchmarksMatchInput regenerates BENCHMARKS.md from its checked-in
// input and fails when the checked-in file differs: the file holds exactly
// the figures docs/benchmarks.tsv records.
func TestBenchmarksMatchInput(t *testing.T) {
	rows, err := readRowsFile(filepath.Join(root, "docs", "benchmarks.tsv"))
	if err != nil {
		t.Fatal(err)
	}
	notes, err := os.ReadFile(filepath.Join(root, "docs", "benchmarks.notes.md"))
	if err != nil {
		t.Fatal(err)
	}
	want, err := Render(rows, string(notes))
	if err != nil {
		t.Fatal(err)
	}
	have, err := os.ReadFile(filepath.Join(root, "BENCHMARKS.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(have, want) {
		t.Fatalf("BENCHMARKS.md is not what docs/benchmarks.tsv and docs/benchmarks.notes.md give (%s); run go run ./lab/cmd/benchtable from the repository root",
			firstDifference(have, want))
	}
}

func TestRenderTables(t *testing.T) {
	rows := []Row{
		{Area: "B", Benchmark: "one", Command: "`go test -bench 'X|Y'`", Compared: "c", Figure: "**1x**", Target: ">= 1x", Status: "met", Date: "2026-01-02", Commit: "abcdef0"},
		{Area: "A", Benchmark: "two", Command: "same run", Compared: "c", Figure: "2", Date: "2026-01-03", Commit: "1234567"},
		{Area: "B", Benchmark: "three", Command: "same run", Compared: "c", Figure: "3", Date: "2026-01-04", Commit: "7654321"},
	}
	md, err := Render(rows, "comment\n## Methods\n\nhow\n\n## A\n\nnote on A\n")
	if err != nil {
		t.Fatal(err)
	}
	s := string(md)
	for _, want := range []string{
		"## Methods\n\nhow\n",
		"| one | `go test -bench 'X\\|Y'` | c | **1x** | >= 1x | met | 2026-01-02, `abcdef0` |\n",
		"| two | same run | c | 2 |  |  | 2026-01-03, `1234567` |\n\nnote on A\n",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("output lacks %q:\n%s", want, s)
		}
	}
	if strings.Contains(s, "comment") {
		t.Error("the notes' text before the first heading was copied")
	}
	// Areas in order of first appearance, rows of an area together.
	b, a, three := strings.Index(s, "## B\n"), strings.Index(s, "## A\n"), strings.Index(s, "| three |")
	if !(b >= 0 && b < three && three < a) {
		t.Errorf("area B (at %d, its second row at %d) should come whole before area A (at %d)", b, three, a)
	}
}

func TestRenderRefusesBadNotes(t *testing.T) {
	rows := []Row{{Area: "A", Benchmark: "b", Command: "c", Compared: "c", Figure: "f", Date: "2026-01-02", Commit: "abcdef0"}}
	for _, tc := range []struct{ name, notes string }{
		{"no Methods", "## A\n\nx\n"},
		{"an area no row has", "## Methods\n\nm\n\n## Z\n\nz\n"},
		{"a heading twice", "## Methods\n\nm\n\n## A\n\n## A\n"},
		{"a top-level heading", "## Methods\n\n# Title\n"},
		{"a third-level heading", "## Methods\n\n### Sub\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Render(rows, tc.notes); !errors.Is(err, errNotes) {
				t.Fatalf("Render = %v, want errNotes", err)
			}
		})
	}
}

func TestNotesKeepFencedHeadings(t *testing.T) {
	n, err := ParseNotes("## Methods\n\n```sh\n## not a heading\n# nor this\n```\n")
	if err != nil {
		t.Fatal(err)
	}
	if got := n.Section(methods); !strings.Contains(got, "## not a heading") {
		t.Fatalf("Methods = %q, want the fenced lines kept", got)
	}
}
