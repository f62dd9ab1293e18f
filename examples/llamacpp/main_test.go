//go:build (linux || darwin) && (amd64 || arm64)

package main

import (
	"bytes"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kvstore/kvstore/internal/testenv"
	"github.com/kvstore/kvstore/llamacpp"
)

// TestRun runs the example twice on one store: the documents are stored
// once (the second run finds the same packets), the request assembles all
// of them, and both runs generate the same answer.
func TestRun(t *testing.T) {
	cfg := config{
		model:  testenv.ModelFile(t, "gocode-hd64.bin"),
		lib:    testenv.Env(t, testenv.LibLlama, llamacpp.LibEnv),
		dir:    t.TempDir(),
		answer: 24,
	}
	var out bytes.Buffer
	r, err := run(&out, cfg)
	if err != nil {
		t.Fatal(err)
	}
	want := 1
	for _, d := range documents {
		want += len(d)
	}
	if r.Cells != want || len(r.Answer) != cfg.answer || r.IDs[0] == r.IDs[1] {
		t.Fatalf("%d cells (want %d), %d answer tokens, ids %v", r.Cells, want, len(r.Answer), r.IDs)
	}
	for _, s := range []string{"stored document 2", "3 packets", "answer:", r.IDs[1].Short()} {
		if !strings.Contains(out.String(), s) {
			t.Fatalf("output lacks %q:\n%s", s, out.String())
		}
	}
	r2, err := run(&bytes.Buffer{}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(r.IDs, r2.IDs) || !slices.Equal(r.Answer, r2.Answer) {
		t.Fatalf("second run: ids %v answer %v; first %v %v", r2.IDs, r2.Answer, r.IDs, r.Answer)
	}
	t.Log(out.String())
}

// A model that is not there is an error that says how to give one.
func TestRunMissingModel(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "none.bin")
	_, err := run(&bytes.Buffer{}, config{model: missing, answer: 1})
	if err == nil || !strings.Contains(err.Error(), missing) || !strings.Contains(err.Error(), "-model") {
		t.Fatalf("run with %s: %v", missing, err)
	}
}
