package main

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Files that are not valid safetensors KV packets fail with exit 1 and a
// message, and store nothing.
func TestImportBad(t *testing.T) {
	dir, ids := testStore(t)
	good := filepath.Join(t.TempDir(), "good.safetensors")
	kv(t, "--dir", dir, "export", ids[0].String(), good).want(t, exitOK)
	b, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	raw := func(h string) []byte { return append(binary.LittleEndian.AppendUint64(nil, uint64(len(h))), h...) }
	for _, c := range []struct {
		name string
		data []byte
		want string
	}{
		{"truncated", b[:len(b)-3], "cover"},
		{"huge", raw(`{"kv":{"dtype":"BF16","shape":[1000000,1000000,1000000],"data_offsets":[0,2000000000000000000]}}`), "cover"},
		{"no model", raw(`{}`), "kvstore.model"},
		{"empty", nil, "too short"},
	} {
		t.Run(c.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), c.name+".safetensors")
			if err := os.WriteFile(file, c.data, 0o644); err != nil {
				t.Fatal(err)
			}
			dst := t.TempDir()
			r := kv(t, "--dir", dst, "import", file).want(t, exitFail)
			if !strings.Contains(r.stderr, c.want) {
				t.Fatalf("stderr %q lacks %q", r.stderr, c.want)
			}
		})
	}
	kv(t, "--dir", t.TempDir(), "import", filepath.Join(t.TempDir(), "missing.safetensors")).want(t, exitFail)
}

// import into a directory that holds no store creates nothing without
// --create (a mistyped --dir), and makes the store with it.
func TestImportNeedsCreate(t *testing.T) {
	dir, ids := testStore(t)
	file := filepath.Join(t.TempDir(), "p.safetensors")
	kv(t, "--dir", dir, "export", ids[0].String(), file).want(t, exitOK)
	dst := filepath.Join(t.TempDir(), "new")
	r := kv(t, "--dir", dst, "import", file).want(t, exitFail)
	if !strings.Contains(r.stderr, "--create") {
		t.Fatalf("stderr %q does not say --create", r.stderr)
	}
	if _, err := os.Stat(dst); !os.IsNotExist(err) {
		t.Fatalf("a refused import left %s behind: %v", dst, err)
	}
	kv(t, "--dir", dst, "--create", "import", file).want(t, exitOK)
	kv(t, "--dir", dst, "import", file).want(t, exitOK) // the store exists now
	kv(t, "--dir", dst, "check").want(t, exitOK)
}
