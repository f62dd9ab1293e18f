package testenv

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"syscall"
	"testing"
)

func TestRequired(t *testing.T) {
	t.Setenv("KVSTORE_REQUIRE", "model, gxx")
	if !Required(Model) || !Required(Gxx) || Required(S3) {
		t.Fatal("model,gxx: want model and gxx required, s3 not")
	}
	t.Setenv("KVSTORE_REQUIRE", "all")
	if !Required(S3) || !Required(LibLlama) || Required(Long) || Required(GPU) {
		t.Fatal("all: want every CI capability required, long and gpu not")
	}
	t.Setenv("KVSTORE_REQUIRE", "")
	if Required(Model) {
		t.Fatal("empty: nothing required")
	}
}

// TestRequireNamesKnown catches a typo in the switch CI sets: a name this
// package does not know would silently require nothing.
func TestRequireNamesKnown(t *testing.T) {
	for _, f := range strings.Split(os.Getenv("KVSTORE_REQUIRE"), ",") {
		if f = strings.TrimSpace(f); f != "" && !Known(f) {
			t.Errorf("KVSTORE_REQUIRE names unknown capability %q", f)
		}
	}
}

func TestModelPath(t *testing.T) {
	t.Setenv("KVSTORE_TESTMODEL", "")
	t.Setenv("KVSTORE_TESTDATA", t.TempDir())
	if _, ok := ModelPath("stories260K.bin"); ok {
		t.Fatal("found a model in an empty KVSTORE_TESTDATA")
	}
	d := t.TempDir()
	if err := os.WriteFile(d+"/gocode-hd64.bin", []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KVSTORE_TESTDATA", d)
	if p, ok := ModelPath("gocode-hd64.bin"); !ok || p != d+"/gocode-hd64.bin" {
		t.Fatalf("ModelPath = %q, %v", p, ok)
	}
	// KVSTORE_TESTMODEL overrides stories260K.bin alone, present or not.
	m := d + "/model.bin"
	t.Setenv("KVSTORE_TESTMODEL", m)
	if p, ok := ModelPath("stories260K.bin"); ok || p != m {
		t.Fatalf("missing override: ModelPath = %q, %v", p, ok)
	}
	if err := os.WriteFile(m, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if p, ok := ModelPath("stories260K.bin"); !ok || p != m {
		t.Fatalf("present override: ModelPath = %q, %v", p, ok)
	}
	if p, ok := ModelPath("gocode-hd64.bin"); !ok || p != d+"/gocode-hd64.bin" {
		t.Fatalf("override leaked to gocode-hd64.bin: ModelPath = %q, %v", p, ok)
	}
}

// TestSharedModels: the checkpoints the project's tests use are found
// from the module (required in CI, where ../shared/testdata is present).
func TestSharedModels(t *testing.T) {
	for _, name := range []string{"stories260K.bin", "gocode-hd64.bin"} {
		p := ModelFile(t, name)
		if st, err := os.Stat(p); err != nil || st.Size() < 1<<20 {
			t.Fatalf("%s: %v (size %v)", p, err, st)
		}
	}
}

// recorder is a testing.TB that records how Need ended the test instead
// of ending it; like testing's, its Fatalf and Skipf end the goroutine.
type recorder struct {
	testing.TB
	failed, skipped string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(f string, args ...any) {
	r.failed = fmt.Sprintf(f, args...)
	runtime.Goexit()
}

func (r *recorder) Skipf(f string, args ...any) {
	r.skipped = fmt.Sprintf(f, args...)
	runtime.Goexit()
}

// need runs Need on a fresh recorder in its own goroutine.
func need(t *testing.T, c Capability, ok bool, why string) *recorder {
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		Need(r, c, ok, why)
	}()
	<-done
	return r
}

// TestNeed: a missing capability skips, saying why and how to require it;
// a required one fails; a present one does neither.
func TestNeed(t *testing.T) {
	t.Setenv("KVSTORE_REQUIRE", "")
	r := need(t, Gxx, false, "no g++ on PATH")
	if r.failed != "" || !strings.Contains(r.skipped, "no g++ on PATH") || !strings.Contains(r.skipped, "KVSTORE_REQUIRE=gxx") {
		t.Fatalf("not required: failed %q, skipped %q", r.failed, r.skipped)
	}
	t.Setenv("KVSTORE_REQUIRE", "model,gxx")
	r = need(t, Gxx, false, "no g++ on PATH")
	if r.skipped != "" || !strings.Contains(r.failed, "gxx required") {
		t.Fatalf("required: failed %q, skipped %q", r.failed, r.skipped)
	}
	r = need(t, Gxx, true, "no g++ on PATH")
	if r.failed != "" || r.skipped != "" {
		t.Fatalf("present: failed %q, skipped %q", r.failed, r.skipped)
	}
}

// TestGoToolchain: the go command that runs this test is found.
func TestGoToolchain(t *testing.T) {
	p := GoToolchain(t)
	if st, err := os.Stat(p); err != nil || st.IsDir() {
		t.Fatalf("go at %q: %v", p, err)
	}
}

// TestSmallFS checks that the tmpfs SmallFS mounts is really full at its
// size: a write past it fails with ENOSPC.
func TestSmallFS(t *testing.T) {
	dir := SmallFS(t, 1<<20)
	f, err := os.Create(dir + "/fill")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	_, err = f.Write(make([]byte, 2<<20))
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("writing 2 MiB to a 1 MiB tmpfs: err %v, want no space left on device", err)
	}
}
