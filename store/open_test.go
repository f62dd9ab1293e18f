package store

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store/internal/bloblog"
)

// writeFile writes a copy of b to path on fs (Pebble's MemFS scribbles
// over a written buffer in race builds, and callers reuse theirs).
func writeFile(t *testing.T, fs vfs.FS, path string, b []byte) {
	t.Helper()
	b = bytes.Clone(b)
	f, err := fs.Create(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
}

// TestOpenFormatFile: a newer major in either copy of FORMAT is refused
// (ErrVersion) whatever the other says; bad bytes in one copy are served
// from the other and a read-write open rewrites them; bad bytes in both
// are ErrCorruption naming the remedy.
func TestOpenFormatFile(t *testing.T) {
	newer := format.EncodeFormatFile(format.Version{Major: format.FormatMajor + 1})
	cases := []struct {
		name  string
		files []string
		data  []byte
		want  error
	}{
		{"newer major in FORMAT", []string{formatFileName}, newer, ErrVersion},
		{"newer major in FORMAT.copy", []string{formatCopyName}, newer, ErrVersion},
		{"newer major in both", []string{formatFileName, formatCopyName}, newer, ErrVersion},
		{"garbage FORMAT", []string{formatFileName}, []byte("not a format file at all!"), nil},
		{"empty FORMAT.copy", []string{formatCopyName}, nil, nil},
		{"garbage in both", []string{formatFileName, formatCopyName}, []byte("not a format file at all!"), ErrCorruption},
		{"empty both", []string{formatFileName, formatCopyName}, nil, ErrCorruption},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fs := vfs.NewMem()
			db := openMem(t, fs, nil)
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			for _, name := range c.files {
				writeFile(t, fs, "/db/"+name, c.data)
			}
			for _, readOnly := range []bool{true, false} {
				db, err := Open("/db", &Options{FS: fs, ReadOnly: readOnly})
				if err == nil {
					db.Close()
				}
				if c.want == nil && err != nil || !errors.Is(err, c.want) {
					t.Fatalf("Open, read-only %v: %v, want %v", readOnly, err, c.want)
				}
				if errors.Is(c.want, ErrCorruption) && !strings.Contains(err.Error(), "kvstore recover") {
					t.Fatalf("Open, read-only %v: %q names no remedy", readOnly, err)
				}
			}
			for _, name := range []string{formatFileName, formatCopyName} {
				b := readFile(t, fs, "/db/"+name)
				if c.want == nil && !bytes.Equal(b, format.EncodeFormatFile(format.Current)) {
					t.Fatalf("%s after a read-write open: %x", name, b)
				}
			}
			// A refused Open releases the lock: with a good FORMAT it opens.
			for _, name := range c.files {
				writeFile(t, fs, "/db/"+name, format.EncodeFormatFile(format.Current))
			}
			openMem(t, fs, nil).Close()
		})
	}
}

// readFile returns the bytes of a file of fs.
func readFile(t *testing.T, fs vfs.FS, path string) []byte {
	t.Helper()
	f, err := fs.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestOpenRefusesForeignDirectory(t *testing.T) {
	fs := vfs.NewMem()
	if err := fs.MkdirAll("/db", 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, fs, "/db/precious.txt", []byte("data"))
	if _, err := Open("/db", &Options{FS: fs}); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("Open of a foreign directory: %v", err)
	}
	if _, err := fs.Stat("/db/catalog"); err == nil {
		t.Fatal("Open created a catalog in a foreign directory")
	}
}

func TestReadOnly(t *testing.T) {
	fs := vfs.NewMem()
	if _, err := Open("/db", &Options{FS: fs, ReadOnly: true}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("read-only Open of a missing store: %v", err)
	}
	db := openMem(t, fs, nil)
	spec := testSpec(format.DTypeBF16, 1, 1, 4)
	p := randPacket(spec, "ns", 3, 1)
	id, err := db.Put(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	db, err = Open("/db", &Options{FS: fs, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	checkPacket(t, db, p, id)
	if _, err := db.Put(context.Background(), randPacket(spec, "ns", 3, 2)); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("Put: %v", err)
	}
	if err := db.Delete(context.Background(), "ns", spec.Fingerprint(), id); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("Delete: %v", err)
	}
}

func TestOpenLockOnDisk(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir, nil); !errors.Is(err, ErrLocked) {
		t.Fatalf("second Open: %v, want ErrLocked", err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db, err = Open(dir, nil)
	if err != nil {
		t.Fatalf("Open after Close: %v", err)
	}
	db.Close()
}

func TestOptions(t *testing.T) {
	bad := []Options{
		{BlobFileSize: 100},
		{CatalogCacheSize: -1},
		{CatalogMemTableSize: 1000},
	}
	for _, o := range bad {
		if err := o.Validate(); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("Validate(%+v) = %v", o, err)
		}
		if _, err := Open("/db", &Options{FS: vfs.NewMem(), BlobFileSize: o.BlobFileSize,
			CatalogCacheSize: o.CatalogCacheSize, CatalogMemTableSize: o.CatalogMemTableSize}); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("Open with %+v: %v", o, err)
		}
	}
	o := (&Options{}).EnsureDefaults()
	if o.FS != vfs.Default || o.BlobFileSize != DefaultBlobFileSize || o.Logger == nil ||
		o.CatalogCacheSize != DefaultCatalogCacheSize || o.CatalogMemTableSize != DefaultCatalogMemTableSize ||
		o.DisableChecksums || o.ReadOnly {
		t.Fatalf("defaults: %+v", o)
	}
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
}

// TestOpenPreopensFiles: Open opens (and, on the OS's file system, maps)
// every catalogued blob file and caches every model spec before the first
// read, in read-write and read-only opens, so that the first read pays for
// neither; a blob file missing at Open does not fail it, and its packets'
// reads report ErrCorruption as before.
func TestOpenPreopensFiles(t *testing.T) {
	dir := t.TempDir()
	spec := testSpec(format.DTypeF16, 2, 2, 8)
	o := &Options{BlobFileSize: 24 << 10, Logger: quiet}
	db, err := Open(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	var ids []format.PacketID
	for i := range 6 {
		id, err := db.Put(context.Background(), randPacket(spec, "ns", 300, uint64(i)))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	for _, ro := range []bool{false, true} {
		o := *o
		o.ReadOnly = ro
		db, err := Open(dir, &o)
		if err != nil {
			t.Fatal(err)
		}
		if len(db.files) < 2 {
			t.Fatalf("read-only %v: %d blob files, want several", ro, len(db.files))
		}
		for num, f := range db.files {
			if !f.IsOpen() {
				t.Errorf("read-only %v: blob file %d not open after Open", ro, num)
			}
		}
		if _, ok := db.models.Load(spec.Fingerprint()); !ok {
			t.Errorf("read-only %v: model spec not cached by Open", ro)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	}

	db, err = Open(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	v, err := db.Get(context.Background(), "ns", spec.Fingerprint(), ids[0])
	if err != nil {
		t.Fatal(err)
	}
	num := v.Header().BlobFile
	v.Release()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, blobsDirName, bloblog.FileName(num))); err != nil {
		t.Fatal(err)
	}
	if db, err = Open(dir, o); err != nil {
		t.Fatalf("Open with blob file %d missing: %v", num, err)
	}
	defer db.Close()
	if _, err := db.Get(context.Background(), "ns", spec.Fingerprint(), ids[0]); !errors.Is(err, ErrCorruption) {
		t.Fatalf("Get of a packet in the missing blob file %d: %v, want ErrCorruption", num, err)
	}
}
