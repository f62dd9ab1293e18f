package catalog

import (
	"errors"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/kvstore/kvstore/format"
)

// TestRequireStore: a file is ErrInvalidArgument for every open; a
// missing directory, or one without FORMAT and FORMAT.copy, is the
// caller's not-found sentinel only for an open that must find a store,
// unless it holds blob files (ErrCorruption: a store that lost both).
func TestRequireStore(t *testing.T) {
	notFound := errors.New("not found")
	fs := vfs.NewMem()
	if err := fs.MkdirAll("/s", 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := fs.Create("/file", vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	for _, must := range []bool{false, true} {
		if err := RequireStore(fs, "/file", "blobs", must, notFound); !errors.Is(err, format.ErrInvalidArgument) {
			t.Errorf("must %v: a file: %v, want ErrInvalidArgument", must, err)
		}
		for _, dir := range []string{"/missing", "/s"} {
			err := RequireStore(fs, dir, "blobs", must, notFound)
			if must != errors.Is(err, notFound) || !must && err != nil {
				t.Errorf("must %v: %s: %v", must, dir, err)
			}
		}
	}
	for _, remove := range []string{"", FormatFileName, FormatCopyName} {
		if err := WriteFormat(fs, "/s", format.Current); err != nil {
			t.Fatal(err)
		}
		if remove != "" {
			if err := fs.Remove("/s/" + remove); err != nil {
				t.Fatal(err)
			}
		}
		if err := RequireStore(fs, "/s", "blobs", true, notFound); err != nil {
			t.Errorf("a store with FORMAT, %q removed: %v", remove, err)
		}
	}
	if err := fs.Remove("/s/" + FormatFileName); err != nil {
		t.Fatal(err)
	}
	if err := RequireStore(fs, "/s", "blobs", true, notFound); !errors.Is(err, notFound) {
		t.Errorf("neither copy: %v, want not found", err)
	}
	if err := fs.MkdirAll("/s/blobs", 0o755); err != nil {
		t.Fatal(err)
	}
	putFile(t, fs, "/s/blobs/000001.blob", format.EncodeBlobHeader(1))
	if err := RequireStore(fs, "/s", "blobs", true, notFound); !errors.Is(err, format.ErrCorruption) {
		t.Errorf("blob files without FORMAT: %v, want ErrCorruption", err)
	}
}

// TestPrepareDir creates a missing directory and leaves an existing one.
func TestPrepareDir(t *testing.T) {
	fs := vfs.NewMem()
	for range 2 {
		if err := PrepareDir(fs, "/a/b"); err != nil {
			t.Fatal(err)
		}
		if st, err := fs.Stat("/a/b"); err != nil || !st.IsDir() {
			t.Fatalf("/a/b after PrepareDir: %v", err)
		}
	}
}
