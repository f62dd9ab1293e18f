package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/kvstore/kvstore/adapter"
	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/internal/testenv"
	"github.com/kvstore/kvstore/lab/llama"
	"github.com/kvstore/kvstore/store"
)

// putAdapter stores a in a store in dir (made if need be) for model's
// packets of dtype, with the fingerprint the adapter verbs compute, under
// id (its content id when ""), as kvtrain adapter does; it returns the id
// and the fingerprint.
func putAdapter(t *testing.T, dir, model, dtype, id string, a *adapter.Adapter) (string, format.Fingerprint) {
	t.Helper()
	mf := adapterModel{path: model, dtype: dtype}
	_, fp, err := mf.load()
	if err != nil {
		t.Fatal(err)
	}
	db, err := store.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if id == "" {
		id = a.ID()
	}
	if err := adapter.Put(db, fp, id, a); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return id, fp
}

// loadModel loads the llama2.c checkpoint at path.
func loadModel(t *testing.T, path string) *llama.Model {
	t.Helper()
	m, err := llama.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// A stored adapter (as kvtrain adapter stores it: its content id, its
// training config) is exported as safetensors and imported back under
// another id, the same values; it is bound to its packets' fingerprint.
// lab/cmd/kvtrain's tests train and store adapters.
func TestAdapterExportImport(t *testing.T) {
	model := testenv.ModelFile(t, "stories260K.bin")
	dir := t.TempDir()
	a, err := adapter.Init(loadModel(t, model), 2, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	a.TrainConfig = `{"method":"kv-packet self-distillation","epochs":2}`
	id, _ := putAdapter(t, dir, model, "f32", "", a)
	file, got := exportAdapter(t, dir, model, id)
	if got.ID() != id || !strings.Contains(got.TrainConfig, `"epochs":2`) || got.HeaderRows() != 2 || got.TrailerRows() != 1 {
		t.Fatalf("exported adapter %s (config %s), stored %s", got.ID(), got.TrainConfig, id)
	}
	r := kv(t, "--dir", dir, "adapter", "import", "--model", model, "--id", "copy", file).want(t, exitOK)
	if !strings.Contains(r.stdout, "adapter    copy") || !strings.Contains(r.stdout, "2 header + 1 trailer (768 bytes f32)") {
		t.Fatalf("import: %q", r.stdout)
	}
	if _, back := exportAdapter(t, dir, model, "copy"); back.ID() != id {
		t.Fatalf("imported copy exports as %s, want %s", back.ID(), id)
	}
	// The adapter is bound to the packets' model fingerprint: another dtype
	// is another model.
	kv(t, "--dir", dir, "adapter", "export", "--model", model, "--dtype", "bf16", "--id", "copy", file).want(t, exitFail)
	kv(t, "--dir", dir, "adapter", "frobnicate").want(t, exitUsage)
}

// A hidden BOS header (kvtrain adapter --init token's) survives export:
// the file says the header is hidden.
func TestAdapterExportHiddenHeader(t *testing.T) {
	model := testenv.ModelFile(t, "stories260K.bin")
	dir := t.TempDir()
	a, err := adapter.InitToken(loadModel(t, model), 1, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	id, _ := putAdapter(t, dir, model, "f32", "", a)
	_, got := exportAdapter(t, dir, model, id)
	if !got.HideHeader || len(got.Header) != got.Dim || len(got.Trailer) != 0 {
		t.Fatalf("stored hide=%v, %d header and %d trailer values (dim %d)", got.HideHeader, len(got.Header), len(got.Trailer), got.Dim)
	}
}

// adapter train left the CLI: whatever its flags, it is a usage error
// naming the lab command that trains, and it touches no store.
func TestAdapterTrainMoved(t *testing.T) {
	model := testenv.ModelFile(t, "stories260K.bin")
	dir := filepath.Join(t.TempDir(), "store")
	for _, args := range [][]string{
		{"adapter", "train"},
		{"--dir", dir, "--create", "adapter", "train", "--model", model, "--epochs", "2", "--init", "bos"},
	} {
		r := kv(t, args...).want(t, exitUsage)
		if !strings.Contains(r.stderr, "go run ./lab/cmd/kvtrain adapter") || r.stdout != "" {
			t.Fatalf("%v: stdout %q, stderr %q", args, r.stdout, r.stderr)
		}
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("adapter train made a store: %v", err)
	}
	r := kv(t, "adapter", "--help").want(t, exitOK)
	if strings.Contains(r.stdout, "\n  train ") || !strings.Contains(r.stdout, "go run ./lab/cmd/kvtrain adapter") {
		t.Fatalf("adapter --help lists train or does not say where it went:\n%s", r.stdout)
	}
}

// adapter ls lists every model's adapters, or one model's (--model with
// --dtype, or --fingerprint); other artifacts are not adapters.
func TestAdapterLs(t *testing.T) {
	model := testenv.ModelFile(t, "stories260K.bin")
	dir := t.TempDir()
	m := loadModel(t, model)
	visible, err := adapter.Init(m, 2, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	hidden, err := adapter.InitToken(m, 1, 0, 1)
	if err != nil {
		t.Fatal(err)
	}
	idF32, f32 := putAdapter(t, dir, model, "f32", "", visible)
	_, bf16 := putAdapter(t, dir, model, "bf16", "tok", hidden)
	db, err := store.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.PutArtifact(f32, "router/W", []byte{1, 2, 3, 4}, store.ArtifactMeta{}); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	rows := map[format.Fingerprint]string{f32: idF32 + " 2 false 1 768", bf16: "tok 1 true 0 256"}
	ls := func(args ...string) []string {
		t.Helper()
		var out adapterLsOutput
		r := kv(t, append([]string{"--dir", dir, "--json", "adapter", "ls"}, args...)...).want(t, exitOK)
		if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
			t.Fatalf("%v: %q", err, r.stdout)
		}
		var got []string
		for _, a := range out.Adapters {
			got = append(got, strings.Join([]string{a.Model, a.ID, jsonText(a.Header), jsonText(a.HideHeader), jsonText(a.Trailer), jsonText(a.Bytes)}, " "))
			if a.Stored <= a.Bytes || a.Created.IsZero() {
				t.Errorf("%s: %d bytes stored for %d bytes of values, created %v", a.ID, a.Stored, a.Bytes, a.Created)
			}
		}
		return got
	}
	want := func(fps ...format.Fingerprint) string {
		var w []string
		for _, fp := range fps {
			w = append(w, fp.String()+" "+rows[fp])
		}
		return strings.Join(w, "\n")
	}
	all := []format.Fingerprint{f32, bf16}
	if f32.String() > bf16.String() {
		all = []format.Fingerprint{bf16, f32}
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, want(all...)},
		{[]string{"--model", model}, want(f32)},
		{[]string{"--model", model, "--dtype", "bf16"}, want(bf16)},
		{[]string{"--fingerprint", strings.ToUpper(bf16.Short())}, want(bf16)},
		{[]string{"--fingerprint", f32.String()}, want(f32)},
		{[]string{"--model", model, "--weights-id", "other"}, ""},
	} {
		if got := strings.Join(ls(c.args...), "\n"); got != c.want {
			t.Errorf("adapter ls %v:\n%s\nwant\n%s", c.args, got, c.want)
		}
	}
	r := kv(t, "--dir", dir, "adapter", "ls").want(t, exitOK)
	for _, s := range []string{"ID", "MODEL", "HEADER", "TRAILER", "STORED", idF32 + "  " + f32.Short(), "tok", bf16.Short(), "1 hidden"} {
		if !strings.Contains(r.stdout, s) {
			t.Errorf("table lacks %q:\n%s", s, r.stdout)
		}
	}
	if strings.Contains(r.stdout, "router") {
		t.Errorf("table lists another artifact:\n%s", r.stdout)
	}
	empty := t.TempDir()
	if db, err := store.Open(empty, nil); err != nil {
		t.Fatal(err)
	} else if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if r := kv(t, "--dir", empty, "--json", "adapter", "ls").want(t, exitOK); strings.TrimSpace(r.stdout) != "{\n  \"adapters\": []\n}" {
		t.Errorf("empty store: %q", r.stdout)
	}
	for _, args := range [][]string{
		{"--dir", dir, "adapter", "ls", "--fingerprint", "xyz"},
		{"--dir", dir, "adapter", "ls", "--fingerprint", "ab", "--model", model},
		{"--dir", dir, "adapter", "ls", "extra"},
		{"adapter", "ls"},
	} {
		kv(t, args...).want(t, exitUsage)
	}
}

// jsonText is v as JSON.
func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
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
