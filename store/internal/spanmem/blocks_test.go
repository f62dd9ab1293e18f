package spanmem

import (
	"errors"
	"log/slog"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store/internal/bloblog"
)

type counts struct{ read, verified, corrupt uint64 }

func (c *counts) Read(n uint64)     { c.read += n }
func (c *counts) Verified(n uint64) { c.verified += n }
func (c *counts) Corrupt()          { c.corrupt++ }

// blockFile writes blob file 1 in dir: the header, then an 8 KiB extent
// whose bytes are their offsets mod 251.
func blockFile(t *testing.T, fs vfs.FS, dir string) *format.SpanMeta {
	t.Helper()
	ext := make([]byte, 8192)
	for i := range ext {
		ext[i] = byte(i % 251)
	}
	f, err := fs.Create(fs.PathJoin(dir, bloblog.FileName(1)), vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(append(format.EncodeBlobHeader(1), ext...)); err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	return &format.SpanMeta{ExtentOffset: format.BlobHeaderSize, ExtentLength: 8192}
}

func TestBlocksRead(t *testing.T) {
	for _, c := range []struct {
		name string
		fs   vfs.FS
		dir  string
		mmap bool
	}{
		{"copy", vfs.NewMem(), "blobs", false},
		{"mapped", vfs.Default, t.TempDir(), true},
	} {
		t.Run(c.name, func(t *testing.T) {
			if err := c.fs.MkdirAll(c.dir, 0o755); err != nil {
				t.Fatal(err)
			}
			m := blockFile(t, c.fs, c.dir)
			f := bloblog.NewFile(c.fs, c.dir, 1, c.mmap, 0, slog.New(slog.DiscardHandler))
			defer f.Release()
			var n counts
			b, err := NewBlocks("ctx", m, f, true, &n)
			if err != nil {
				t.Fatal(err)
			}
			want := make([]byte, 100)
			for i := range want {
				want[i] = byte((1000 + i) % 251)
			}
			crc := format.CRC(want)
			what := func() string { return "block" }
			got, err := b.Read(nil, 1000, 100, crc, what)
			if err != nil || string(got) != string(want) {
				t.Fatalf("read: %v, bytes match %v", err, string(got) == string(want))
			}
			dst := make([]byte, 100)
			if got, err = b.Read(dst, 1000, 100, crc, what); err != nil || &got[0] != &dst[0] {
				t.Fatalf("read into dst: %v, in dst %v", err, err == nil && &got[0] == &dst[0])
			}
			if _, err := b.Read(nil, 1000, 100, crc^1, what); !errors.Is(err, format.ErrCorruption) {
				t.Fatalf("wrong crc: %v, want ErrCorruption", err)
			}
			if n.read != 200 || n.corrupt != 1 {
				t.Fatalf("counted %+v, want 200 bytes read and 1 corruption", n)
			}
			// A mapped block is verified once; a copied one every time.
			wantVerified := uint64(300)
			if c.mmap {
				wantVerified = 200
			}
			if n.verified != wantVerified {
				t.Fatalf("verified %d bytes, want %d", n.verified, wantVerified)
			}
		})
	}
}

func TestFactorBlockAndCheckHead(t *testing.T) {
	m := &format.SpanMeta{Layers: 2, KVHeads: 1, Spans: []format.Span{{Start: 0, End: 4, Factored: true}, {Start: 4, End: 6}}}
	h := &format.HeadMeta{K: []format.FactorBlock{{Length: 7}, {}}, V: []format.FactorBlock{{Length: 9}, {}}}
	if fb, err := FactorBlock(m, h, 0, format.ChunkV); err != nil || fb.Length != 9 {
		t.Fatalf("V of span 0: %+v, %v", fb, err)
	}
	for _, c := range []struct {
		span int
		kind format.ChunkKind
	}{{1, format.ChunkK}, {2, format.ChunkK}, {-1, format.ChunkV}, {0, format.ChunkKind(9)}} {
		if _, err := FactorBlock(m, h, c.span, c.kind); !errors.Is(err, format.ErrInvalidArgument) {
			t.Errorf("span %d kind %v: %v, want ErrInvalidArgument", c.span, c.kind, err)
		}
	}
	if CheckHead(m, 1, 0) != nil || !errors.Is(CheckHead(m, 2, 0), format.ErrInvalidArgument) || !errors.Is(CheckHead(m, 0, 1), format.ErrInvalidArgument) {
		t.Fatal("CheckHead bounds")
	}
	moved := *m
	moved.BlobFile, moved.ExtentOffset = 9, 1<<20
	replaced := moved
	replaced.CreatedUnixNs++
	if !SameWrite(m, &moved) || SameWrite(m, &replaced) {
		t.Fatal("SameWrite: a moved memory is the same write, a replaced one is not")
	}
	if pos := Positions(format.Span{Start: 4, End: 7}, 100); len(pos) != 3 || pos[0] != 104 || pos[2] != 106 {
		t.Fatalf("positions %v", pos)
	}
}
