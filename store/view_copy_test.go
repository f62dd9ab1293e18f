package store

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store/internal/view"
)

// TestCopyChunk copies every chunk through CopyChunk on every read path
// and compares it with Chunk; then flips one byte in the middle of a chunk
// and requires CopyChunk to report that chunk's ChunkError, on a fresh view
// and again on the same one, while the other chunks still copy.
func TestCopyChunk(t *testing.T) {
	spec := testSpec(format.DTypeBF16, 3, 2, 32)
	for _, k := range storeKinds {
		t.Run(k.name, func(t *testing.T) {
			db, fs, dir := openKind(t, k.disk, k.noMmap)
			ids := putAll(t, db, []*Packet{floatPacket(spec, "ns", 40, 0, 0, 1)})
			v, err := db.Get(context.Background(), "ns", spec.Fingerprint(), ids[0])
			if err != nil {
				t.Fatal(err)
			}
			h, path := v.Header(), view.File(v.in).Path()
			want := make([][]byte, len(h.Chunks))
			for i := range h.Chunks {
				dst := make([]byte, h.Chunks[i].Length+5)
				n, err := v.CopyChunk(dst, i)
				c, cerr := v.Chunk(i)
				if err != nil || cerr != nil || n != len(c) || !bytes.Equal(dst[:n], c) {
					t.Fatalf("chunk %d: CopyChunk %d bytes, %v; Chunk %v", i, n, err, cerr)
				}
				want[i] = append([]byte(nil), c...)
			}
			if _, err := v.CopyChunk(make([]byte, h.Chunks[0].Length-1), 0); !errors.Is(err, ErrInvalidArgument) {
				t.Fatalf("short destination: %v", err)
			}
			v.Release()
			if _, err := v.CopyChunk(make([]byte, h.Chunks[0].Length), 0); !errors.Is(err, ErrClosed) {
				t.Fatalf("released view: %v", err)
			}
			db.Close()

			const bad = 3
			flipByte(t, fs, path, h.Chunks[bad].Offset+h.Chunks[bad].Length/2+1)
			db, err = Open(dir, &Options{FS: fs, DisableMmap: k.noMmap})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			v, err = db.Get(context.Background(), "ns", spec.Fingerprint(), ids[0])
			if err != nil {
				t.Fatal(err)
			}
			defer v.Release()
			for try := range 2 {
				for i := range h.Chunks {
					dst := make([]byte, h.Chunks[i].Length)
					_, err := v.CopyChunk(dst, i)
					var ce *ChunkError
					switch {
					case i == bad && (!errors.As(err, &ce) || ce.Offset != h.Chunks[bad].Offset || ce.Want != h.Chunks[bad].CRC32C):
						t.Fatalf("try %d: CopyChunk over a flipped byte: %v, want its ChunkError", try, err)
					case i != bad && (err != nil || !bytes.Equal(dst, want[i])):
						t.Fatalf("try %d: chunk %d: %v", try, i, err)
					}
				}
			}
			if s := db.Stats(); s.Corruptions != 2 {
				t.Fatalf("%d corruptions counted, want 2", s.Corruptions)
			}
		})
	}
}
