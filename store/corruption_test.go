package store

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store/internal/bloblog"
	"github.com/kvstore/kvstore/store/internal/view"
)

// flipByte flips one bit of the byte at off in a blob file of a closed store.
func flipByte(t *testing.T, fs vfs.FS, path string, off uint64) {
	t.Helper()
	if mem, ok := fs.(*vfs.MemFS); ok {
		b, err := mem.UnsafeGetFileDataBuffer(path)
		if err != nil {
			t.Fatal(err)
		}
		b[off] ^= 0x10
		return
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var b [1]byte
	if _, err := f.ReadAt(b[:], int64(off)); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x10
	if _, err := f.WriteAt(b[:], int64(off)); err != nil {
		t.Fatal(err)
	}
}

func TestCorruptChunkDetected(t *testing.T) {
	for _, k := range storeKinds {
		t.Run(k.name, func(t *testing.T) {
			db, fs, dir := openKind(t, k.disk, k.noMmap)
			spec := testSpec(format.DTypeF32, 3, 2, 3) // 24-byte rows: padded chunks
			p := randPacket(spec, "ns", 5, 1)
			id, err := db.Put(context.Background(), p)
			if err != nil {
				t.Fatal(err)
			}
			v, err := db.Get(context.Background(), "ns", spec.Fingerprint(), id)
			if err != nil {
				t.Fatal(err)
			}
			h := v.Header()
			path := view.File(v.in).Path()
			v.Release()
			db.Close()

			bad := h.Chunks[3] // layer 1 V
			flipByte(t, fs, path, bad.Offset+bad.Length/2)
			// Padding between chunks, before the trailer, and the trailer itself
			// are not tensor bytes: flips there are harmless to reads.
			flipByte(t, fs, path, h.Chunks[0].Offset+h.Chunks[0].Length)
			flipByte(t, fs, path, h.ExtentOffset+h.ExtentLength-format.TrailerSize-1)
			flipByte(t, fs, path, h.ExtentOffset+h.ExtentLength-1)

			db, err = Open(dir, &Options{FS: fs, DisableMmap: k.noMmap, Logger: quiet})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			v, err = db.Get(context.Background(), "ns", spec.Fingerprint(), id)
			if err != nil {
				t.Fatalf("Get: %v (a chunk's corruption must not fail Get)", err)
			}
			defer v.Release()
			for l := range p.Layers {
				if l != 1 {
					kk, vv, err := v.Layer(l)
					if err != nil || !bytes.Equal(kk, p.Layers[l].K) || !bytes.Equal(vv, p.Layers[l].V) {
						t.Fatalf("layer %d: %v", l, err)
					}
					continue
				}
				for range 2 { // reported every time, never cached as good
					_, _, err := v.Layer(l)
					var ce *ChunkError
					if !errors.Is(err, ErrCorruption) || !errors.As(err, &ce) {
						t.Fatalf("layer 1 with a flipped byte: %v, want a ChunkError", err)
					}
					if ce.Offset != bad.Offset || ce.Layer != 1 || ce.Kind != format.ChunkV || ce.Packet != id ||
						!strings.HasSuffix(ce.File, bloblog.FileName(h.BlobFile)) || ce.Want == ce.Computed {
						t.Fatalf("ChunkError %+v does not name the bad chunk", ce)
					}
					for _, s := range []string{bloblog.FileName(h.BlobFile), "layer 1 V", id.Short()} {
						if !strings.Contains(err.Error(), s) {
							t.Fatalf("error %q does not mention %q", err, s)
						}
					}
				}
			}
			if s := db.Stats(); s.Corruptions != 2 {
				t.Fatalf("stats count %d corruptions, want 2", s.Corruptions)
			}
			// Without verification the flipped bytes are returned as they are.
			db.Close()
			db2, err := Open(dir, &Options{FS: fs, DisableChecksums: true, DisableMmap: k.noMmap})
			if err != nil {
				t.Fatal(err)
			}
			defer db2.Close()
			v2, err := db2.Get(context.Background(), "ns", spec.Fingerprint(), id)
			if err != nil {
				t.Fatal(err)
			}
			defer v2.Release()
			if _, vv, err := v2.Layer(1); err != nil || bytes.Equal(vv, p.Layers[1].V) {
				t.Fatalf("DisableChecksums: %v, or the flip is not there", err)
			}
		})
	}
}

func TestTruncatedBlobFile(t *testing.T) {
	for _, k := range storeKinds {
		t.Run(k.name, func(t *testing.T) {
			db, fs, dir := openKind(t, k.disk, k.noMmap)
			spec := testSpec(format.DTypeBF16, 2, 2, 8)
			p := randPacket(spec, "ns", 50, 1)
			id, err := db.Put(context.Background(), p)
			if err != nil {
				t.Fatal(err)
			}
			path := fs.PathJoin(dir, blobsDirName, bloblog.FileName(1))
			db.Close()
			if mem, ok := fs.(*vfs.MemFS); ok {
				f, _ := mem.Create(path, vfs.WriteCategoryUnspecified) // empties the file
				f.Close()
			} else if err := os.Truncate(path, format.BlobHeaderSize+100); err != nil {
				t.Fatal(err)
			}
			db, err = Open(dir, &Options{FS: fs, DisableMmap: k.noMmap})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if _, err := db.Get(context.Background(), "ns", spec.Fingerprint(), id); !errors.Is(err, ErrCorruption) {
				t.Fatalf("Get of a packet past the end of its file: %v, want ErrCorruption", err)
			}
			// The writer does not append after lost bytes: it starts a new file.
			p2 := randPacket(spec, "ns", 5, 2)
			id2, err := db.Put(context.Background(), p2)
			if err != nil {
				t.Fatal(err)
			}
			checkPacket(t, db, p2, id2)
			if files := db.BlobFiles(); len(files) != 2 || !files[0].Sealed {
				t.Fatalf("blob files after a Put on a truncated active file: %+v", files)
			}
		})
	}
}
