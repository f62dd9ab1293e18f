package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kvstore/kvstore/internal/testenv"
	"github.com/kvstore/kvstore/store"
)

// goData writes a directory of .go files: two to train on, one held out.
func goData(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	body := strings.Repeat("func f(x int) int {\n\tif x > 2 {\n\t\treturn x * 3\n\t}\n\treturn len(\"kvstore\") + x\n}\n", 4)
	for _, name := range []string{"a.go", "b.go", "a_test.go"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("package p\n\n"+body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// storedGate reads the rank gate stored for model's f32 spans in dir.
func storedGate(t *testing.T, dir, model string) []byte {
	t.Helper()
	_, fp, err := (&modelFlags{path: model, dtype: "f32"}).load()
	if err != nil {
		t.Fatal(err)
	}
	db, err := store.Open(dir, &store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	data, err := db.GetArtifact(fp, store.ArtifactRankGate)
	if err != nil {
		t.Fatal(err)
	}
	info, err := db.StatArtifact(fp, store.ArtifactRankGate)
	if err != nil {
		t.Fatal(err)
	}
	g, err := store.DecodeRankGate(data, info.Meta)
	if err != nil || g.MaxRank != 8 || g.Hidden != 6 || !strings.Contains(info.Meta.Note, "lambda=0.5") {
		t.Fatalf("stored gate r_max %d hidden %d note %q: %v", g.MaxRank, g.Hidden, info.Meta.Note, err)
	}
	return data
}

// rankgate trains, measures on the held-out file and stores the gate; a
// run interrupted before its first context saves its checkpoint, exits
// 130 and stores nothing, and resuming it stores the gate an unbroken run
// does.
func TestRankGateTrain(t *testing.T) {
	model := testenv.ModelFile(t, "stories260K.bin")
	data := goData(t)
	args := func(dir string, extra ...string) []string {
		return append([]string{"rankgate", "--dir", dir, "--create", "--model", model, "--data", data, "--contexts", "2",
			"--context-len", "64", "--r-max", "8", "--hidden", "6", "--steps", "30", "--batch", "16"}, extra...)
	}
	whole := t.TempDir()
	r := kvtrain(t, append([]string{"--json"}, args(whole, "--heldout", "1")...)...).want(t, exitOK)
	var rep rankgateReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("%v: %q", err, r.stdout)
	}
	if rep.Artifact != store.ArtifactRankGate || rep.Samples == 0 || rep.Steps != 30 || rep.Heldout == nil || rep.Heldout.Samples == 0 ||
		rep.Heldout.EqualBytes.TotalBytes > rep.Heldout.Gate.TotalBytes || !strings.Contains(r.stderr, "kvtrain rankgate: ") {
		t.Fatalf("report %+v, stderr %q", rep, r.stderr)
	}
	want := storedGate(t, whole, model)

	dir := t.TempDir()
	ck := filepath.Join(t.TempDir(), "rg.ckpt")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var out, errb bytes.Buffer
	if code := run(ctx, args(dir, "--checkpoint", ck), &out, &errb); code != exitInterrupted || out.Len() != 0 || !strings.Contains(errb.String(), "interrupted: kvtrain rankgate") {
		t.Fatalf("cancelled: exit %d, stdout %q, stderr %q", code, out.String(), errb.String())
	}
	if _, err := os.Stat(ck); err != nil {
		t.Fatalf("no checkpoint after the interrupt: %v", err)
	}
	kvtrain(t, args(dir, "--checkpoint", ck)...).want(t, exitOK)
	if got := storedGate(t, dir, model); !bytes.Equal(got, want) {
		t.Fatal("the resumed run stored another gate than the unbroken one")
	}
	// Other data flags refuse the checkpoint; other training flags retrain
	// on its samples.
	kvtrain(t, args(dir, "--checkpoint", ck, "--context-len", "48")...).want(t, exitUsage)
	if r := kvtrain(t, args(dir, "--checkpoint", ck, "--lambda", "0.25")...).want(t, exitOK); strings.Contains(r.stderr, "context 1/") {
		t.Fatalf("retraining drew contexts again: %q", r.stderr)
	}
}
