package view

import (
	"bytes"
	"errors"
	"log/slog"
	"math/rand/v2"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/internal/crc32c"
	"github.com/kvstore/kvstore/store/internal/bloblog"
)

var errClosed = errors.New("test: closed")

type counters struct {
	read, verified, corrupt atomic.Uint64
	views                   atomic.Int64
}

// stored is one extent of random chunks written through bloblog, on an OS
// directory (mapped) or a MemFS (copied), and its header.
type stored struct {
	fs     vfs.FS
	chunks [][]byte
	h      *format.PacketHeader
	path   string
}

func store(t *testing.T, disk bool) *stored {
	t.Helper()
	fs, dir := vfs.FS(vfs.NewMem()), "/blobs"
	if disk {
		fs, dir = vfs.Default, t.TempDir()
	}
	if err := fs.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	w := &bloblog.Writer{FS: fs, Dir: dir, Limit: 1 << 30, Next: 1}
	defer w.Close()
	const n, length = 4, 3000
	rng := rand.New(rand.NewPCG(7, 1))
	s := &stored{fs: fs}
	for range n {
		b := make([]byte, length)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		s.chunks = append(s.chunks, b)
	}
	lay, err := bloblog.NewLayout(n, length)
	if err != nil {
		t.Fatal(err)
	}
	a, err := w.Prepare(lay.Length)
	if err != nil {
		t.Fatal(err)
	}
	off := a.End
	id := format.PacketID{9}
	crcs, err := bloblog.WriteExtent(a.F, vfs.InvalidFd, a.Path, off, &lay, func(i int) []byte { return s.chunks[i] }, nil, id)
	if err == nil {
		err = a.F.SyncData()
	}
	if err != nil {
		t.Fatal(err)
	}
	w.Committed(lay.Length)
	s.path = a.Path
	s.h = &format.PacketHeader{ID: id, BlobFile: 1, ExtentOffset: off, ExtentLength: lay.Length, Layers: n / 2}
	for i := range n {
		s.h.Chunks = append(s.h.Chunks, format.ChunkDesc{Layer: uint32(i / 2), Kind: format.ChunkKind(1 + i%2),
			BlobFile: 1, Offset: off + lay.Rel(i), Length: lay.Size(i), RawLength: lay.Size(i), CRC32C: crcs[i]})
	}
	return s
}

func (s *stored) open(t *testing.T, c *counters) *View {
	t.Helper()
	f := bloblog.NewFile(s.fs, s.fs.PathDir(s.path), 1, true, 0, slog.New(slog.DiscardHandler))
	c.views.Add(1)
	v, err := New(s.h, f, Options{Verify: true, Closed: errClosed,
		Counters: Counters{BytesRead: &c.read, VerifiedBytes: &c.verified, Corruptions: &c.corrupt, Views: &c.views}})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestViewReads reads every chunk through Chunk, CopyChunk and Source (the
// assembly's path), mapped and copied, and checks bytes, counters and
// Release.
func TestViewReads(t *testing.T) {
	for _, disk := range []bool{false, true} {
		s := store(t, disk)
		var c counters
		v := s.open(t, &c)
		if Mapped(v) != (disk && bloblog.MmapSupported) {
			t.Errorf("disk=%v: mapped %v", disk, Mapped(v))
		}
		for i, want := range s.chunks {
			b, err := v.Chunk(i)
			if err != nil || !bytes.Equal(b, want) {
				t.Fatalf("disk=%v: chunk %d: %v", disk, i, err)
			}
			dst := make([]byte, len(want))
			if n, err := v.CopyChunk(dst, i); err != nil || n != len(want) || !bytes.Equal(dst, want) {
				t.Fatalf("disk=%v: copy chunk %d: %d, %v", disk, i, n, err)
			}
		}
		if got := c.read.Load(); got != uint64(len(s.chunks)*len(s.chunks[0])) {
			t.Errorf("disk=%v: %d bytes counted read", disk, got)
		}
		if c.verified.Load() == 0 || c.corrupt.Load() != 0 {
			t.Errorf("disk=%v: verified %d, corrupt %d", disk, c.verified.Load(), c.corrupt.Load())
		}
		v.Release()
		v.Release()
		if _, err := v.Chunk(0); !errors.Is(err, errClosed) {
			t.Errorf("disk=%v: Chunk after Release: %v", disk, err)
		}
		if _, _, err := SourceOf(v).Raw(0); !errors.Is(err, errClosed) {
			t.Errorf("disk=%v: Raw after Release: %v", disk, err)
		}
		if n := c.views.Load(); n != 0 {
			t.Errorf("disk=%v: %d views counted open", disk, n)
		}
	}
}

// TestViewCorrupt flips one byte of chunk 1 on disk: Chunk, CopyChunk and
// Source.Checked each report a *bloblog.ChunkError (ErrCorruption) and
// count it, and the other chunks still read.
func TestViewCorrupt(t *testing.T) {
	for _, disk := range []bool{false, true} {
		s := store(t, disk)
		f, err := s.fs.OpenReadWrite(s.path, vfs.WriteCategoryUnspecified)
		if err != nil {
			t.Fatal(err)
		}
		bad := []byte{s.chunks[1][10] ^ 0x40}
		if _, err := f.WriteAt(bad, int64(s.h.Chunks[1].Offset)+10); err != nil {
			t.Fatal(err)
		}
		f.Close()
		var c counters
		v := s.open(t, &c)
		var ce *bloblog.ChunkError
		if _, err := v.Chunk(1); !errors.As(err, &ce) || !errors.Is(err, ErrCorruption) {
			t.Fatalf("disk=%v: Chunk(1) = %v, want a ChunkError", disk, err)
		}
		if _, err := v.CopyChunk(make([]byte, len(s.chunks[1])), 1); !errors.Is(err, ErrCorruption) {
			t.Fatalf("disk=%v: CopyChunk(1) = %v", disk, err)
		}
		if err := SourceOf(v).Checked(1, s.h.Chunks[1].CRC32C^1, false); !errors.Is(err, ErrCorruption) {
			t.Fatalf("disk=%v: Checked with a wrong CRC = %v", disk, err)
		}
		if c.corrupt.Load() != 3 {
			t.Errorf("disk=%v: %d corruptions counted, want 3", disk, c.corrupt.Load())
		}
		if b, err := v.Chunk(2); err != nil || !bytes.Equal(b, s.chunks[2]) {
			t.Errorf("disk=%v: chunk 2 after the bad one: %v", disk, err)
		}
		v.Release()
	}
}

// TestSourceFirstRead checks the assembly's first read of a mapped chunk:
// Raw says to read it (nil bytes, check), the bytes ReadAt gives are the
// chunk's, and once Checked with their CRC the chunk is remembered for
// the mapping, so that the next view's Raw says to read it unchecked (the
// extent is under readMax); a wrong CRC is ErrCorruption and remembers
// nothing.
func TestSourceFirstRead(t *testing.T) {
	if !bloblog.MmapSupported {
		t.Skip("no mmap on this platform")
	}
	s := store(t, true)
	var c counters
	v := s.open(t, &c)
	defer v.Release()
	src := SourceOf(v)
	for i, want := range s.chunks {
		b, check, err := src.Raw(i)
		if err != nil || b != nil || !check {
			t.Fatalf("chunk %d: first Raw = %d bytes, check %v, %v; want nil, true", i, len(b), check, err)
		}
		got := make([]byte, len(want))
		if err := src.ReadAt(got, s.h.Chunks[i].Offset); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("chunk %d: ReadAt: %v", i, err)
		}
		crc := crc32c.Checksum(got)
		if i == 1 {
			if err := src.Checked(i, crc^1, false); !errors.Is(err, ErrCorruption) {
				t.Fatalf("chunk 1: Checked with a wrong CRC = %v", err)
			}
			continue
		}
		if err := src.Checked(i, crc, false); err != nil {
			t.Fatalf("chunk %d: Checked: %v", i, err)
		}
	}
	w := SourceOf(&View{h: v.h, file: v.file, verify: true, extent: v.extent, seen: make([]atomic.Bool, len(s.chunks))})
	for i, want := range s.chunks {
		b, check, err := w.Raw(i)
		if err != nil {
			t.Fatal(err)
		}
		if i == 1 { // refused: still to be read and checked
			if b != nil || !check {
				t.Errorf("chunk 1 after a bad CRC: Raw = %d bytes, check %v", len(b), check)
			}
			continue
		}
		if check || b != nil { // an extent under readMax is always read
			t.Errorf("chunk %d after Checked: Raw = %d bytes, check %v; want nil, no check", i, len(b), check)
		}
		got := make([]byte, len(want))
		if err := w.ReadAt(got, s.h.Chunks[i].Offset); err != nil || !bytes.Equal(got, want) {
			t.Errorf("chunk %d: ReadAt after Checked: %v", i, err)
		}
	}
}
