package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kvstore/kvstore/adapter"
	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/internal/testenv"
	"github.com/kvstore/kvstore/store"
)

// result is one run of kvtrain.
type result struct {
	code           int
	stdout, stderr string
}

// kvtrain runs kvtrain with args in-process; stderr is not a terminal.
func kvtrain(t *testing.T, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), args, &out, &errb)
	return result{code: code, stdout: out.String(), stderr: errb.String()}
}

// want fails unless r exited with code.
func (r result) want(t *testing.T, code int) result {
	t.Helper()
	if r.code != code {
		t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", r.code, code, r.stdout, r.stderr)
	}
	return r
}

// trainJSON runs kvtrain adapter --json with args and decodes its report.
func trainJSON(t *testing.T, args ...string) (report, result) {
	t.Helper()
	r := kvtrain(t, append([]string{"--json", "adapter"}, args...)...).want(t, exitOK)
	var rep report
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("%v: %q", err, r.stdout)
	}
	return rep, r
}

// storedAdapter reads adapter id of model (a llama2.c checkpoint, packets
// of dtype f32) from the store in dir.
func storedAdapter(t *testing.T, dir, model, id string) *adapter.Adapter {
	t.Helper()
	mf := modelFlags{path: model, dtype: "f32"}
	_, fp, err := mf.load()
	if err != nil {
		t.Fatal(err)
	}
	db, err := store.Open(dir, &store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	a, err := adapter.Get(db, fp, id)
	if err != nil {
		t.Fatal(err)
	}
	if fp.String() != fingerprint(t, model) {
		t.Fatalf("fingerprint %s, want %s", fp, fingerprint(t, model))
	}
	return a
}

// fingerprint is the fingerprint kvstore's adapter verbs compute for
// model's f32 packets: the spec of weights id llama2.c:<file name>:<size>.
func fingerprint(t *testing.T, model string) string {
	t.Helper()
	mf := modelFlags{path: model, dtype: "f32"}
	m, _, err := mf.load()
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(model)
	if err != nil {
		t.Fatal(err)
	}
	return m.Spec(format.DTypeF32, fmt.Sprintf("llama2.c:%s:%d", filepath.Base(model), st.Size())).Fingerprint().String()
}

// adapter trains, reports and stores an adapter: its content id, the
// rows and epochs asked for, the training config recorded with it; a
// progress line goes to stderr. kvstore's adapter tests export and import
// stored adapters.
func TestAdapterTrain(t *testing.T) {
	model := testenv.ModelFile(t, "stories260K.bin")
	dir := t.TempDir()
	rep, r := trainJSON(t, "--dir", dir, "--create", "--model", model, "--requests", "2", "--epochs", "2",
		"--header", "2", "--trailer", "1", "--doc-len", "4", "--question-len", "2", "--answer", "2")
	if rep.Header != 2 || rep.Trailer != 1 || rep.Bytes != 3*64*4 || len(rep.EpochLoss) != 2 || !strings.HasPrefix(rep.ID, "kvp-") ||
		rep.Model != fingerprint(t, model) {
		t.Fatalf("report %+v", rep)
	}
	if !strings.Contains(r.stderr, "kvtrain adapter: step 1/4, epoch 1, loss ") {
		t.Fatalf("no progress line on stderr: %q", r.stderr)
	}
	a := storedAdapter(t, dir, model, rep.ID)
	if a.ID() != rep.ID || !strings.Contains(a.TrainConfig, `"epochs":2`) || a.HideHeader {
		t.Fatalf("stored adapter %s (config %s, hidden %v), reported %s", a.ID(), a.TrainConfig, a.HideHeader, rep.ID)
	}
	// --id names it; the text report says what was stored.
	r = kvtrain(t, "adapter", "--dir", dir, "--model", model, "--id", "mine", "--requests", "1", "--epochs", "1",
		"--header", "1", "--trailer", "1", "--doc-len", "4", "--question-len", "2", "--answer", "1").want(t, exitOK)
	if !strings.Contains(r.stdout, "adapter    mine\n") || !strings.Contains(r.stdout, "1 header + 1 trailer (512 bytes f32)") ||
		!strings.Contains(r.stdout, "1 epochs in") {
		t.Fatalf("text report: %q", r.stdout)
	}
	storedAdapter(t, dir, model, "mine")
}

// --init token starts from a hidden BOS header: the stored adapter hides
// its header; a bad --init is a usage error.
func TestAdapterTrainInitToken(t *testing.T) {
	model := testenv.ModelFile(t, "stories260K.bin")
	dir := t.TempDir()
	rep, _ := trainJSON(t, "--dir", dir, "--create", "--model", model, "--init", "token", "--requests", "2", "--epochs", "1",
		"--header", "1", "--trailer", "0", "--doc-len", "4", "--question-len", "2", "--answer", "2")
	a := storedAdapter(t, dir, model, rep.ID)
	if !a.HideHeader || len(a.Header) != a.Dim || len(a.Trailer) != 0 {
		t.Fatalf("--init token stored hide=%v, %d header and %d trailer values (dim %d)", a.HideHeader, len(a.Header), len(a.Trailer), a.Dim)
	}
	kvtrain(t, "--dir", dir, "adapter", "--model", model, "--init", "bos").want(t, exitUsage)
	kvtrain(t, "--dir", dir, "adapter", "--model", model, "--init", "token", "--init-token", "512").want(t, exitUsage)
	// --init-token starts the header from another token's embedding.
	rep2, _ := trainJSON(t, "--dir", dir, "--model", model, "--init", "token", "--init-token", "10", "--requests", "2", "--epochs", "1",
		"--header", "1", "--trailer", "0", "--doc-len", "4", "--question-len", "2", "--answer", "2")
	if b := storedAdapter(t, dir, model, rep2.ID); !b.HideHeader || b.ID() == a.ID() {
		t.Fatalf("--init-token 10 stored hide=%v, id %s (BOS's %s)", b.HideHeader, b.ID(), a.ID())
	}
}

// --init text starts from a hidden header of a file's bytes; --epochs 0
// stores it untrained, and --baseline still measures it.
func TestAdapterInitText(t *testing.T) {
	model := testenv.ModelFile(t, "stories260K.bin")
	dir := t.TempDir()
	text := filepath.Join(t.TempDir(), "header.txt")
	if err := os.WriteFile(text, []byte("\x01ab\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	rep, res := trainJSON(t, "--dir", dir, "--create", "--model", model, "--init", "text", "--init-text", text, "--epochs", "0",
		"--trailer", "0", "--requests", "2", "--doc-len", "4", "--question-len", "2", "--answer", "2", "--baseline")
	if !strings.Contains(res.stderr, "with the initial adapter") {
		t.Fatalf("--baseline printed no initial loss: %q", res.stderr)
	}
	a := storedAdapter(t, dir, model, rep.ID)
	m, _, err := (&modelFlags{path: model, dtype: "f32"}).load()
	if err != nil {
		t.Fatal(err)
	}
	want, err := adapter.InitText(m, []int{1, 'a', 'b', '\n'}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !a.HideHeader || a.HeaderRows() != 4 || a.ID() != want.ID() || len(rep.EpochLoss) != 0 {
		t.Fatalf("stored hide=%v, %d header rows, id %s (want %s), epoch losses %v", a.HideHeader, a.HeaderRows(), a.ID(), want.ID(), rep.EpochLoss)
	}
}

// Bad usage exits 2 with a message and stores nothing; a --dir that holds
// no store is a failure without --create, and creates nothing.
func TestAdapterUsage(t *testing.T) {
	model := testenv.ModelFile(t, "stories260K.bin")
	dir := t.TempDir()
	none := filepath.Join(dir, "none")
	for _, c := range []struct {
		args []string
		code int
	}{
		{[]string{}, exitUsage},
		{[]string{"frobnicate"}, exitUsage},
		{[]string{"adapter", "--model", model}, exitUsage},
		{[]string{"adapter", "--dir", dir, "--create"}, exitUsage},
		{[]string{"adapter", "--dir", dir, "--create", "--model", model, "extra"}, exitUsage},
		{[]string{"adapter", "--dir", dir, "--create", "--model", model, "--bogus"}, exitUsage},
		{[]string{"adapter", "--dir", dir, "--create", "--model", model, "--dtype", "int8"}, exitUsage},
		{[]string{"adapter", "--dir", dir, "--create", "--model", model, "--docs-min", "3", "--docs-max", "2"}, exitUsage},
		{[]string{"adapter", "--dir", dir, "--create", "--model", model, "--epochs", "-1"}, exitUsage},
		{[]string{"adapter", "--dir", dir, "--create", "--model", model, "--init", "text"}, exitUsage},
		{[]string{"adapter", "--dir", dir, "--create", "--model", model, "--init-text", model}, exitUsage},
		{[]string{"adapter", "--dir", dir, "--create", "--model", model, "--init", "text", "--init-text", none}, exitUsage},
		{[]string{"adapter", "--dir", dir, "--create", "--model", model, "--lr", "0"}, exitUsage},
		{[]string{"adapter", "--dir", dir, "--create", "--model", model, "--loss-on", "question"}, exitUsage},
		{[]string{"adapter", "--dir", dir, "--create", "--model", model, "--loss-on", "value"}, exitUsage},
		{[]string{"adapter", "--dir", none, "--model", model, "--requests", "1", "--epochs", "1"}, exitFail},
		{[]string{"adapter", "--dir", dir, "--create", "--model", filepath.Join(dir, "missing.bin")}, exitFail},
	} {
		t.Run(fmt.Sprint(c.args), func(t *testing.T) {
			r := kvtrain(t, c.args...).want(t, c.code)
			if r.stderr == "" || r.stdout != "" {
				t.Fatalf("stdout %q, stderr %q", r.stdout, r.stderr)
			}
		})
	}
	if _, err := os.Stat(none); !os.IsNotExist(err) {
		t.Fatalf("a --dir without a store got one without --create: %v", err)
	}
	if r := kvtrain(t, "adapter", "--help").want(t, exitOK); !strings.Contains(r.stdout, "Usage:\n  kvtrain adapter --dir STORE") {
		t.Fatalf("--help: %q", r.stdout)
	}
}

// A cancelled context (a signal before the first request is drawn) exits
// 130 with one line and stores nothing.
func TestAdapterCancelled(t *testing.T) {
	model := testenv.ModelFile(t, "stories260K.bin")
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var out, errb bytes.Buffer
	code := run(ctx, []string{"adapter", "--dir", dir, "--create", "--model", model, "--requests", "2"}, &out, &errb)
	if code != exitInterrupted || out.Len() != 0 ||
		!strings.HasSuffix(errb.String(), "\ninterrupted: kvtrain adapter: train: stopped drawing request 1 of 2: context canceled\n") {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out.String(), errb.String())
	}
	db, err := store.Open(dir, &store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Artifacts(func(i store.ArtifactInfo) error { return fmt.Errorf("stored %q", i.Name) }); err != nil {
		t.Fatal(err)
	}
}
