package testenv

import (
	"os"
	"strings"
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
