package store

import (
	"context"
	"errors"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/kvstore/kvstore/format"
)

func writeFile(t *testing.T, fs vfs.FS, path string, b []byte) {
	t.Helper()
	f, err := fs.Create(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
}

func TestOpenFormatFile(t *testing.T) {
	cases := []struct {
		name string
		data []byte
		want error
	}{
		{"newer major", format.EncodeFormatFile(format.Version{Major: format.FormatMajor + 1}), ErrVersion},
		{"garbage", []byte("not a format file at all!"), ErrCorruption},
		{"empty", nil, ErrCorruption},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fs := vfs.NewMem()
			db := openMem(t, fs, nil)
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			writeFile(t, fs, "/db/FORMAT", c.data)
			if _, err := Open("/db", &Options{FS: fs}); !errors.Is(err, c.want) {
				t.Fatalf("Open: %v, want %v", err, c.want)
			}
			// A refused Open releases the lock: with a good FORMAT it opens.
			writeFile(t, fs, "/db/FORMAT", format.EncodeFormatFile(format.Current))
			openMem(t, fs, nil).Close()
		})
	}
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
