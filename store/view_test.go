package store

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store/internal/view"
)

// storeKinds are the read paths: copies on MemFS, mmap on disk, copies on
// disk.
var storeKinds = []struct {
	name   string
	disk   bool
	noMmap bool
	mapped bool
}{
	{"mem", false, false, false},
	{"disk-mmap", true, false, true},
	{"disk-copy", true, true, false},
}

func openKind(t *testing.T, disk, noMmap bool) (*DB, vfs.FS, string) {
	t.Helper()
	fs, dir := vfs.FS(vfs.NewMem()), "/db"
	if disk {
		fs, dir = vfs.Default, t.TempDir()
	}
	db, err := Open(dir, &Options{FS: fs, DisableMmap: noMmap, BlobFileSize: 128 << 10, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	return db, fs, dir
}

func TestViewSurvivesDeleteAndClose(t *testing.T) {
	for _, k := range storeKinds {
		t.Run(k.name, func(t *testing.T) {
			db, _, _ := openKind(t, k.disk, k.noMmap)
			spec := testSpec(format.DTypeBF16, 3, 2, 8)
			p := randPacket(spec, "ns", 9, 4)
			id, err := db.Put(context.Background(), p)
			if err != nil {
				t.Fatal(err)
			}
			v, err := db.Get(context.Background(), "ns", spec.Fingerprint(), id)
			if err != nil {
				t.Fatal(err)
			}
			if mapped := view.Mapped(v.in); mapped != k.mapped {
				t.Fatalf("view mapped=%v, want %v", mapped, k.mapped)
			}
			k0, _, err := v.Layer(0) // read before Delete, checked after
			if err != nil {
				t.Fatal(err)
			}
			if err := db.Delete(context.Background(), "ns", spec.Fingerprint(), id); err != nil {
				t.Fatal(err)
			}
			if _, err := db.Get(context.Background(), "ns", spec.Fingerprint(), id); !errors.Is(err, ErrNotFound) {
				t.Fatalf("Get after Delete: %v", err)
			}
			// Another packet goes in after the delete; it must not reuse the bytes.
			if _, err := db.Put(context.Background(), randPacket(spec, "ns", 9, 5)); err != nil {
				t.Fatal(err)
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			if _, err := db.Get(context.Background(), "ns", spec.Fingerprint(), id); !errors.Is(err, ErrClosed) {
				t.Fatalf("Get after Close: %v", err)
			}
			for l := range p.Layers {
				k, val, err := v.Layer(l)
				if err != nil {
					t.Fatalf("layer %d through a view of a deleted packet of a closed DB: %v", l, err)
				}
				if !bytes.Equal(k, p.Layers[l].K) || !bytes.Equal(val, p.Layers[l].V) {
					t.Fatalf("layer %d changed under a live view", l)
				}
			}
			if !bytes.Equal(k0, p.Layers[0].K) {
				t.Fatal("bytes returned before Delete changed")
			}
			if n := view.File(v.in).Refs(); n != 1 {
				t.Fatalf("blob file refs %d with one view left after Close, want 1", n)
			}
			v.Release()
			v.Release() // idempotent
			if n := view.File(v.in).Refs(); n != 0 {
				t.Fatalf("blob file refs %d after the last release", n)
			}
			if _, _, err := v.Layer(0); !errors.Is(err, ErrClosed) {
				t.Fatalf("Layer after Release: %v", err)
			}
			if _, err := v.Chunk(1); !errors.Is(err, ErrClosed) {
				t.Fatalf("Chunk after Release: %v", err)
			}
		})
	}
}

func TestViewArguments(t *testing.T) {
	db := openMem(t, vfs.NewMem(), nil)
	defer db.Close()
	spec := testSpec(format.DTypeBF16, 2, 1, 8)
	p := randPacket(spec, "ns", 2, 1)
	id, err := db.Put(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	v, err := db.Get(context.Background(), "ns", spec.Fingerprint(), id)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Release()
	for _, l := range []int{-1, 2} {
		if _, _, err := v.Layer(l); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("Layer(%d): %v", l, err)
		}
	}
	for _, i := range []int{-1, 4} {
		if _, err := v.Chunk(i); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("Chunk(%d): %v", i, err)
		}
	}
	if c, err := v.Chunk(3); err != nil || !bytes.Equal(c, p.Layers[1].V) {
		t.Fatalf("Chunk(3) is not layer 1's V: %v", err)
	}
	if s := db.Stats(); s.OpenViews != 1 || s.BytesRead != uint64(len(p.Layers[1].V)) {
		t.Fatalf("stats %+v", s)
	}
}

func TestCloseSemantics(t *testing.T) {
	fs := vfs.NewMem()
	db := openMem(t, fs, nil)
	spec := testSpec(format.DTypeBF16, 1, 1, 4)
	p := randPacket(spec, "ns", 2, 1)
	id, err := db.Put(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Open("/db", &Options{FS: fs}); !errors.Is(err, ErrLocked) {
		t.Fatalf("second Open of an open store: %v, want ErrLocked", err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	fp := spec.Fingerprint()
	second := func(_ any, err error) error { return err }
	third := func(_, _ any, err error) error { return err }
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"Close", db.Close()},
		{"Delete", db.Delete(context.Background(), "ns", fp, id)},
		{"Headers", db.Headers(func(*format.PacketHeader) error { return nil })},
		{"Put", second(db.Put(context.Background(), p))},
		{"Get", second(db.Get(context.Background(), "ns", fp, id))},
		{"Has", second(db.Has(context.Background(), "ns", fp, id))},
		{"List", third(db.List("ns", fp, nil, 1))},
		{"Model", second(db.Model(fp))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !errors.Is(tc.err, ErrClosed) {
				t.Errorf("%s after Close: %v, want ErrClosed", tc.name, tc.err)
			}
		})
	}
	if s := db.Stats(); s.Puts != 1 || len(s.BlobFiles) != 0 {
		t.Fatalf("Stats after Close: %+v", s)
	}
	// The lock is released: the store opens again.
	db = openMem(t, fs, nil)
	defer db.Close()
	checkPacket(t, db, p, id)
}

func TestObsoleteFileRemovedAfterLastView(t *testing.T) {
	fs := vfs.NewMem()
	db := openMem(t, fs, nil)
	defer db.Close()
	spec := testSpec(format.DTypeBF16, 1, 1, 4)
	p := randPacket(spec, "ns", 2, 1)
	id, err := db.Put(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	v, err := db.Get(context.Background(), "ns", spec.Fingerprint(), id)
	if err != nil {
		t.Fatal(err)
	}
	f := view.File(v.in)
	// What compaction will do once it has repointed every header.
	f.MarkObsolete()
	db.dropFile(f.Num())
	if _, err := fs.Stat(f.Path()); err != nil {
		t.Fatalf("obsolete file removed while a view holds it: %v", err)
	}
	if k, _, err := v.Layer(0); err != nil || !bytes.Equal(k, p.Layers[0].K) {
		t.Fatalf("view of an obsolete file: %v", err)
	}
	v.Release()
	if _, err := fs.Stat(f.Path()); err == nil {
		t.Fatal("obsolete file still there after its last view was released")
	}
	if f.Acquire() {
		t.Fatal("a closed blob file was acquired")
	}
}
