package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kvstore/kvstore/adapter"
	"github.com/kvstore/kvstore/internal/testenv"
	"github.com/kvstore/kvstore/lab/train"
)

// --data reads no _test.go file unless --tests is given (the quality
// harnesses evaluate on them), and never testdata or vendor.
func TestAdapterDataLeavesTestsOut(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []struct {
		path string
		fill byte
	}{{"a.go", 'a'}, {"a_test.go", 't'}, {"testdata/b.go", 'd'}, {"vendor/v/c.go", 'v'}} {
		p := filepath.Join(dir, filepath.FromSlash(f.path))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(strings.Repeat(string(f.fill), 64)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		tests bool
		want  string
	}{{false, "a"}, {true, "at"}} {
		f := adapterFlags{data: dir, docLen: 8, qLen: 4, tests: c.tests}
		src, err := f.source(nil)
		if err != nil {
			t.Fatal(err)
		}
		got := ""
		for _, b := range src.(*train.ByteFiles).Files {
			got += string(b[0])
		}
		if got != c.want {
			t.Fatalf("--tests=%v read files starting %q, want %q", c.tests, got, c.want)
		}
	}
}

// --shape needle trains on multi-document needles cut from --data's
// non-test files; --epoch-dir writes each epoch's adapter, and
// --init-file resumes from one.
func TestAdapterNeedleShapeEpochs(t *testing.T) {
	model := testenv.ModelFile(t, "stories260K.bin")
	data := filepath.Join(goRoot(t), "src", "strings")
	dir, epochs := t.TempDir(), filepath.Join(t.TempDir(), "epochs")
	args := []string{"--dir", dir, "--create", "--model", model, "--data", data, "--shape", "needle", "--requests", "2",
		"--docs-min", "2", "--docs-max", "2", "--doc-min", "48", "--doc-len", "64", "--init", "token", "--header", "1", "--trailer", "0",
		"--epochs", "2", "--batch", "2", "--workers", "2", "--epoch-dir", epochs, "--loss-on", "both"}
	rep, r := trainJSON(t, append(args, "--baseline")...)
	if !strings.Contains(r.stderr, "baseline: loss ") || !strings.Contains(r.stderr, "with the initial adapter") {
		t.Fatalf("--baseline: stderr %q", r.stderr)
	}
	if len(rep.EpochLoss) != 2 || !(rep.EpochLoss[0] > 0) {
		t.Fatalf("report %+v", rep)
	}
	final := storedAdapter(t, dir, model, rep.ID)
	last, err := adapter.ReadFile(filepath.Join(epochs, "epoch-2.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	if last.ID() != final.ID() || !last.HideHeader {
		t.Fatalf("epoch 2's file %s (hidden %v), stored %s", last.ID(), last.HideHeader, final.ID())
	}
	if _, err := os.Stat(filepath.Join(epochs, "epoch-1.safetensors")); err != nil {
		t.Fatal(err)
	}
	rep2, _ := trainJSON(t, append(args[2:], "--dir", dir, "--epochs", "1", "--epoch-dir", "", "--init-file", filepath.Join(epochs, "epoch-2.safetensors"))...)
	if a := storedAdapter(t, dir, model, rep2.ID); !a.HideHeader || a.ID() == final.ID() {
		t.Fatalf("resumed from epoch 2: stored %s (hidden %v), epoch 2 was %s", a.ID(), a.HideHeader, final.ID())
	}
	kvtrain(t, "adapter", "--dir", dir, "--model", model, "--shape", "needle").want(t, exitUsage)
	kvtrain(t, "adapter", "--dir", dir, "--model", model, "--shape", "lines", "--data", data).want(t, exitUsage)
}

// goRoot is the Go toolchain's GOROOT: its source is Go that does not
// change as this repository does.
func goRoot(t *testing.T) string {
	t.Helper()
	out, err := exec.Command(testenv.GoToolchain(t), "env", "GOROOT").Output()
	if err != nil {
		t.Fatalf("go env GOROOT: %v", err)
	}
	return strings.TrimSpace(string(out))
}
