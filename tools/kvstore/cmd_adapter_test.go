package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/kvstore/kvstore/adapter"
	"github.com/kvstore/kvstore/internal/testenv"
)

// adapter train stores an adapter; export writes it as safetensors; import
// brings it back under another id, the same values.
func TestAdapterTrainExportImport(t *testing.T) {
	model := testenv.ModelFile(t, "stories260K.bin")
	dir := t.TempDir()
	var rep adapterReport
	r := kv(t, "--dir", dir, "--create", "--json", "adapter", "train", "--model", model, "--requests", "2", "--epochs", "2",
		"--header", "2", "--trailer", "1", "--doc-len", "4", "--question-len", "2", "--answer", "2").want(t, exitOK)
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("%v: %q", err, r.stdout)
	}
	if rep.Header != 2 || rep.Trailer != 1 || rep.Bytes != 3*64*4 || len(rep.EpochLoss) != 2 || !strings.HasPrefix(rep.ID, "kvp-") {
		t.Fatalf("report %+v", rep)
	}
	file, a := exportAdapter(t, dir, model, rep.ID)
	if a.ID() != rep.ID || !strings.Contains(a.TrainConfig, `"epochs":2`) {
		t.Fatalf("exported adapter %s (config %s), stored %s", a.ID(), a.TrainConfig, rep.ID)
	}
	r = kv(t, "--dir", dir, "adapter", "import", "--model", model, "--id", "copy", file).want(t, exitOK)
	if !strings.Contains(r.stdout, "adapter    copy") {
		t.Fatalf("import: %q", r.stdout)
	}
	// The adapter is bound to the packets' model fingerprint: another dtype
	// is another model.
	kv(t, "--dir", dir, "adapter", "export", "--model", model, "--dtype", "bf16", "--id", "copy", file).want(t, exitFail)
	kv(t, "--dir", dir, "adapter", "frobnicate").want(t, exitUsage)
}

// --init token starts from a hidden BOS header: the stored adapter hides
// its header; a bad --init is a usage error.
func TestAdapterTrainInitToken(t *testing.T) {
	model := testenv.ModelFile(t, "stories260K.bin")
	dir := t.TempDir()
	var rep adapterReport
	r := kv(t, "--dir", dir, "--create", "--json", "adapter", "train", "--model", model, "--init", "token", "--requests", "2", "--epochs", "1",
		"--header", "1", "--trailer", "0", "--doc-len", "4", "--question-len", "2", "--answer", "2").want(t, exitOK)
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("%v: %q", err, r.stdout)
	}
	_, a := exportAdapter(t, dir, model, rep.ID)
	if !a.HideHeader || len(a.Header) != a.Dim || len(a.Trailer) != 0 {
		t.Fatalf("--init token stored hide=%v, %d header and %d trailer values (dim %d)", a.HideHeader, len(a.Header), len(a.Trailer), a.Dim)
	}
	kv(t, "--dir", dir, "adapter", "train", "--model", model, "--init", "bos").want(t, exitUsage)
}

// exportAdapter runs adapter export of id from the store in dir and
// returns the file it wrote and the adapter decoded from it.
func exportAdapter(t *testing.T, dir, model, id string) (string, *adapter.Adapter) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "a.safetensors")
	kv(t, "--dir", dir, "adapter", "export", "--model", model, "--id", id, file).want(t, exitOK)
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	a, err := adapter.Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	return file, a
}

// adapter import refuses a file over the artifact limit before reading
// it: a sparse 1 GiB file once took 4.2 GiB and 25 s to be refused.
func TestAdapterImportRefusesOversizeFile(t *testing.T) {
	model := testenv.ModelFile(t, "stories260K.bin")
	file := filepath.Join(t.TempDir(), "big.safetensors")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(file, 1<<30); err != nil {
		t.Fatal(err)
	}
	var out, errb strings.Builder
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	code := run([]string{"--dir", t.TempDir(), "--create", "adapter", "import", "--model", model, file}, &out, &errb)
	runtime.ReadMemStats(&after)
	if code != exitFail || !strings.Contains(errb.String(), "artifact limit") {
		t.Fatalf("exit %d, stderr %q: want a refusal naming the artifact limit", code, errb.String())
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 32<<20 {
		t.Fatalf("refusing a 1 GiB file allocated %d bytes", got)
	}
}
