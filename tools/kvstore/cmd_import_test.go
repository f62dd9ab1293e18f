package main

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kvstore/kvstore/format/safetensors"
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

// import of a directory says so (it used to print its permission bits,
// "d---------"); a refused create (--create over a directory that holds
// other files) and demo there leave no LOCK file behind.
func TestImportDirectoryAndRefusedCreate(t *testing.T) {
	r := kv(t, "--dir", t.TempDir(), "--create", "import", t.TempDir()).want(t, exitFail)
	if !strings.Contains(r.stderr, "is a directory") || strings.Contains(r.stderr, "d---") {
		t.Fatalf("import of a directory: %q", r.stderr)
	}
	dir, ids := testStore(t)
	file := filepath.Join(t.TempDir(), "p.safetensors")
	kv(t, "--dir", dir, "export", ids[0].String(), file).want(t, exitOK)
	for _, args := range [][]string{{"--create", "import", file}, {"demo"}} {
		user := t.TempDir()
		if err := os.WriteFile(filepath.Join(user, "notes.txt"), []byte("mine"), 0o644); err != nil {
			t.Fatal(err)
		}
		r := kv(t, append([]string{"--dir", user}, args...)...).want(t, exitFail)
		if !strings.Contains(r.stderr, "not a kvstore store") {
			t.Errorf("%v over a user's directory: %q", args, r.stderr)
		}
		if names, _ := os.ReadDir(user); len(names) != 1 {
			t.Errorf("%v over a user's directory left %v", args, names)
		}
	}
}

// A hostile safetensors header (an 8.4M-entry data_offsets array filling
// the 16 MiB header limit) is refused at its third offset: import
// allocates a fraction of the header (it used to take 385 MB).
func TestImportHostileHeaderBoundedMemory(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"kv":{"dtype":"U8","shape":[0],"data_offsets":[0`)
	for b.Len() < safetensors.MaxHeaderSize-8 {
		b.WriteString(",0")
	}
	b.WriteString("]}}")
	h := b.String()
	file := filepath.Join(t.TempDir(), "hostile.safetensors")
	if err := os.WriteFile(file, append(binary.LittleEndian.AppendUint64(nil, uint64(len(h))), h...), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb strings.Builder
	var code int
	alloc := allocated(func() { code = run([]string{"--dir", t.TempDir(), "--create", "import", file}, &out, &errb) })
	if code != exitFail || !strings.Contains(errb.String(), "data_offsets") {
		t.Fatalf("exit %d, stderr %q", code, errb.String())
	}
	if alloc > safetensors.MaxHeaderSize {
		t.Fatalf("import of a %d-byte hostile header allocated %d bytes", len(h), alloc)
	}
}
