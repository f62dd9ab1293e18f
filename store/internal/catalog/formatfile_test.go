package catalog

import (
	"errors"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/kvstore/kvstore/format"
)

func putFile(t *testing.T, fs vfs.FS, path string, b []byte) {
	t.Helper()
	f, err := fs.Create(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
}

func TestFormatFile(t *testing.T) {
	fs := vfs.NewMem()
	if err := fs.MkdirAll("db", 0o755); err != nil {
		t.Fatal(err)
	}
	if found, err := ReadFormat(fs, "db"); found || err != nil {
		t.Fatalf("no FORMAT: found %v, %v", found, err)
	}
	if err := WriteFormat(fs, "db"); err != nil {
		t.Fatal(err)
	}
	if found, err := ReadFormat(fs, "db"); !found || err != nil {
		t.Fatalf("written FORMAT: found %v, %v", found, err)
	}
	if _, err := fs.Stat("db/" + FormatTmpName); err == nil {
		t.Fatal("temporary file left after WriteFormat")
	}
	putFile(t, fs, "db/FORMAT", format.EncodeFormatFile(format.Version{Major: format.FormatMajor + 1}))
	if _, err := ReadFormat(fs, "db"); !errors.Is(err, format.ErrVersion) {
		t.Fatalf("newer major: %v, want ErrVersion", err)
	}
	putFile(t, fs, "db/FORMAT", []byte("garbage"))
	if _, err := ReadFormat(fs, "db"); !errors.Is(err, format.ErrCorruption) {
		t.Fatalf("bad FORMAT: %v, want ErrCorruption", err)
	}
}

func TestCheckLeftovers(t *testing.T) {
	fs := vfs.NewMem()
	_ = fs.MkdirAll("db/catalog", 0o755)
	putFile(t, fs, "db/LOCK", nil)
	if err := CheckLeftovers(fs, "db", "LOCK", "catalog", "blobs", FormatTmpName); err != nil {
		t.Fatalf("interrupted creation refused: %v", err)
	}
	putFile(t, fs, "db/notes.txt", nil)
	if err := CheckLeftovers(fs, "db", "LOCK", "catalog", "blobs", FormatTmpName); !errors.Is(err, format.ErrInvalidArgument) {
		t.Fatalf("foreign file: %v, want ErrInvalidArgument", err)
	}
}
