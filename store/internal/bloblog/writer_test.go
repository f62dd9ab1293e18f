package bloblog

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/kvstore/kvstore/format"
)

func fill(rng *rand.Rand, b []byte) {
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
}

var quiet = slog.New(slog.DiscardHandler)

// testExtent is an extent of n chunks of random bytes of length len.
type testExtent struct {
	id     format.PacketID
	chunks [][]byte
	lay    Layout
}

func newTestExtent(t *testing.T, seed uint64, n int, length uint64) *testExtent {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 1))
	e := &testExtent{id: format.PacketID{byte(seed)}}
	for range n {
		b := make([]byte, length)
		fill(rng, b)
		e.chunks = append(e.chunks, b)
	}
	var err error
	if e.lay, err = NewLayout(n, length); err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *testExtent) chunk(i int) []byte { return e.chunks[i] }

// header is a minimal packet header naming e's chunks written at off of
// file num, for File.Chunk.
func (e *testExtent) header(num uint32, off uint64, crcs []uint32) *format.PacketHeader {
	h := &format.PacketHeader{ID: e.id, BlobFile: num, ExtentOffset: off, ExtentLength: e.lay.Length}
	for i := range e.chunks {
		h.Chunks = append(h.Chunks, format.ChunkDesc{Layer: uint32(i / 2), Kind: format.ChunkKind(1 + i%2),
			BlobFile: num, Offset: off + e.lay.Rel(i), Length: e.lay.Size(i), RawLength: e.lay.Size(i), CRC32C: crcs[i]})
	}
	return h
}

// appendExtent is one commit of the store's protocol, less the catalog:
// prepare, write, fdatasync, committed.
func appendExtent(w *Writer, e *testExtent) (*Active, uint64, []uint32, error) {
	a, err := w.Prepare(e.lay.Length)
	if err != nil {
		return nil, 0, nil, err
	}
	off := a.End
	crcs, err := WriteExtent(a.F, vfs.InvalidFd, a.Path, off, &e.lay, e.chunk, nil, e.id)
	if err == nil {
		err = a.F.SyncData()
	}
	if err != nil {
		w.Abandon()
		return a, off, nil, err
	}
	w.Committed(e.lay.Length)
	return a, off, crcs, nil
}

func newWriter(t *testing.T, fs vfs.FS, limit uint64) *Writer {
	t.Helper()
	if err := fs.MkdirAll("/blobs", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := SyncDir(fs, "/"); err != nil {
		t.Fatal(err)
	}
	return &Writer{FS: fs, Dir: "/blobs", Limit: limit, Next: 1}
}

// TestWriterCrash: once an extent is synced it survives a crash byte for
// byte, its trailer names it and its payload CRC is the combination of its
// chunks' CRCs; the extent written after the last sync does not survive.
func TestWriterCrash(t *testing.T) {
	mem := vfs.NewCrashableMem()
	w := newWriter(t, mem, 1<<20)
	e1 := newTestExtent(t, 1, 4, 3000)
	a, off, crcs, err := appendExtent(w, e1)
	if err != nil {
		t.Fatal(err)
	}
	if a.Num != 1 || off != format.BlobHeaderSize || w.Next != 2 || a.Fresh {
		t.Fatalf("first extent in file %d at %d, next %d, fresh %v", a.Num, off, w.Next, a.Fresh)
	}
	// A second extent, written but not synced.
	e2 := newTestExtent(t, 2, 2, 100)
	if _, err := w.Prepare(e2.lay.Length); err != nil {
		t.Fatal(err)
	}
	if _, err := WriteExtent(a.F, vfs.InvalidFd, a.Path, a.End, &e2.lay, e2.chunk, nil, e2.id); err != nil {
		t.Fatal(err)
	}
	crashed := mem.CrashClone(vfs.CrashCloneCfg{})
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}

	f := NewFile(crashed, "/blobs", 1, true, 0, quiet)
	defer f.Release()
	head := make([]byte, format.BlobHeaderSize)
	if err := f.ReadAt(head, 0); err != nil {
		t.Fatal(err)
	}
	if num, err := format.DecodeBlobHeader(head); err != nil || num != 1 {
		t.Fatalf("blob header: file %d, %v", num, err)
	}
	h := e1.header(1, off, crcs)
	for i := range e1.chunks {
		b, err := f.Chunk(h, i, nil, true)
		if err != nil || !bytes.Equal(b, e1.chunks[i]) {
			t.Fatalf("chunk %d after the crash: %v", i, err)
		}
	}
	tb := make([]byte, format.TrailerSize)
	if err := f.ReadAt(tb, off+e1.lay.Length-format.TrailerSize); err != nil {
		t.Fatal(err)
	}
	tr, err := format.DecodeTrailer(tb)
	if err != nil || tr.Packet != e1.id || tr.Offset != off || tr.PayloadLen != e1.lay.Payload || tr.PayloadCRC != PayloadCRC(&e1.lay, crcs) {
		t.Fatalf("trailer %+v, %v", tr, err)
	}
	payload := make([]byte, e1.lay.Payload)
	if err := f.ReadAt(payload, off); err != nil || format.CRC(payload) != tr.PayloadCRC {
		t.Fatalf("payload CRC %08x, trailer %08x (%v)", format.CRC(payload), tr.PayloadCRC, err)
	}
	if err := f.ReadAt(make([]byte, 1), off+e1.lay.Length); !errors.Is(err, ErrCorruption) {
		t.Fatalf("read of the unsynced extent after the crash: %v, want ErrCorruption (past the end)", err)
	}
}

// TestWriterSeals: an extent that would take the active file past its
// limit goes to a new file, and the old one is listed for its record.
func TestWriterSeals(t *testing.T) {
	w := newWriter(t, vfs.NewMem(), 2*format.Alignment)
	e := newTestExtent(t, 3, 1, 4000)
	a1, _, _, err := appendExtent(w, e)
	if err != nil {
		t.Fatal(err)
	}
	a2, off, _, err := appendExtent(w, e)
	if err != nil {
		t.Fatal(err)
	}
	if a1.Num != 1 || a2.Num != 2 || off != format.BlobHeaderSize || w.Next != 3 {
		t.Fatalf("files %d then %d at %d, next %d", a1.Num, a2.Num, off, w.Next)
	}
	if len(w.Sealed) != 0 {
		t.Fatalf("sealed %v after the commit that recorded them", w.Sealed)
	}
	if !w.needsSeal(e.lay.Length) || w.needsSeal(0) || e.lay.Length != format.Alignment {
		t.Fatal("needsSeal does not follow the limit")
	}
}

// TestWriterFaults: a failed write or sync is returned with the file's
// path, the fresh file is forgotten and its number reused by the next
// append, which succeeds.
func TestWriterFaults(t *testing.T) {
	for _, tc := range []struct {
		name string
		kind errorfs.OpKind
	}{{"write", errorfs.OpFileWriteAt}, {"sync", errorfs.OpFileSyncData}} {
		t.Run(tc.name, func(t *testing.T) {
			on := true
			injected := errors.New("injected")
			fs := errorfs.Wrap(vfs.NewMem(), errorfs.InjectorFunc(func(op errorfs.Op) error {
				if on && op.Kind == tc.kind && strings.HasSuffix(op.Path, ".blob") {
					return injected
				}
				return nil
			}))
			w := newWriter(t, fs, 1<<20)
			e := newTestExtent(t, 4, 2, 500)
			_, _, _, err := appendExtent(w, e)
			if !errors.Is(err, injected) && tc.kind == errorfs.OpFileWriteAt {
				t.Fatalf("append with failing writes: %v", err)
			}
			if err == nil {
				t.Fatal("append succeeded with a failing file system")
			}
			if tc.kind == errorfs.OpFileWriteAt && !strings.Contains(err.Error(), "000001.blob") {
				t.Fatalf("error does not name the file: %v", err)
			}
			if w.Cur != nil || w.Next != 1 {
				t.Fatalf("after the failure: active %v, next %d; want none and 1", w.Cur, w.Next)
			}
			on = false
			a, _, _, err := appendExtent(w, e)
			if err != nil || a.Num != 1 || w.Next != 2 {
				t.Fatalf("append after the fault cleared: %v, file %v", err, a)
			}
		})
	}
}

// TestFileRefs: a file's bytes stay readable while a reference is held;
// an obsolete file is removed with its last reference, and no reference
// can be taken after that.
func TestFileRefs(t *testing.T) {
	mem := vfs.NewMem()
	w := newWriter(t, mem, 1<<20)
	e := newTestExtent(t, 5, 2, 64)
	_, off, crcs, err := appendExtent(w, e)
	if err != nil {
		t.Fatal(err)
	}
	_ = w.Close()
	f := NewFile(mem, "/blobs", 1, true, 0, quiet)
	if f.Num() != 1 || f.Path() != "/blobs/000001.blob" || f.Views() != 0 || f.Refs() != 1 {
		t.Fatalf("new file %d %s: views %d, refs %d", f.Num(), f.Path(), f.Views(), f.Refs())
	}
	if !f.Acquire() || f.Views() != 1 {
		t.Fatal("acquire on a live file")
	}
	f.MarkObsolete()
	f.Release() // the registry's
	if _, err := mem.Stat(f.Path()); err != nil {
		t.Fatalf("file removed while a view holds it: %v", err)
	}
	b, err := f.Chunk(e.header(1, off, crcs), 1, nil, true)
	if err != nil || !bytes.Equal(b, e.chunks[1]) {
		t.Fatalf("chunk of an obsolete, held file: %v", err)
	}
	f.Release()
	if _, err := mem.Stat(f.Path()); err == nil {
		t.Fatal("obsolete file still there after its last release")
	}
	if f.Acquire() || f.Referenced() {
		t.Fatal("acquired a closed file")
	}
}

// TestFileChunkErrors: a chunk whose bytes do not match its CRC is a
// ChunkError naming file, offset and CRCs; a range past the file's end is
// ErrCorruption; a verified chunk is remembered, a copied one is not.
func TestFileChunkErrors(t *testing.T) {
	mem := vfs.NewMem()
	w := newWriter(t, mem, 1<<20)
	e := newTestExtent(t, 6, 2, 200)
	_, off, crcs, err := appendExtent(w, e)
	if err != nil {
		t.Fatal(err)
	}
	_ = w.Close()
	f := NewFile(mem, "/blobs", 1, true, 0, quiet)
	defer f.Release()
	h := e.header(1, off, crcs)
	h.Chunks[0].CRC32C ^= 1
	_, err = f.Chunk(h, 0, nil, true)
	var ce *ChunkError
	if !errors.As(err, &ce) || !errors.Is(err, ErrCorruption) || ce.Offset != off || ce.Want != crcs[0]^1 || ce.Computed != crcs[0] || ce.File != f.Path() {
		t.Fatalf("bad chunk: %v", err)
	}
	if b, err := f.Chunk(h, 0, nil, false); err != nil || !bytes.Equal(b, e.chunks[0]) {
		t.Fatalf("unverified read: %v", err)
	}
	h.Chunks[1].Offset = off + e.lay.Length
	if _, err := f.Chunk(h, 1, nil, true); !errors.Is(err, ErrCorruption) {
		t.Fatalf("chunk past the end: %v", err)
	}
	if f.IsVerified(off+e.lay.Rel(1), crcs[1]) {
		t.Fatal("a MemFS file's chunk is remembered as verified: its bytes were copied")
	}
	f.MarkVerified(7, 9)
	if !f.IsVerified(7, 9) || f.IsVerified(7, 8) {
		t.Fatal("verification cache")
	}
	f.ForgetVerified()
	if f.IsVerified(7, 9) {
		t.Fatal("ForgetVerified kept an entry")
	}
	if err := f.ReadAt(make([]byte, 10), 1<<30); !errors.Is(err, ErrCorruption) {
		t.Fatalf("ReadAt past the end: %v", err)
	}
}

// TestSyncDirFault: a failing directory sync fails the create of a new
// file, so no extent is written to a file whose name may not survive.
func TestSyncDirFault(t *testing.T) {
	fs := errorfs.Wrap(vfs.NewMem(), errorfs.InjectorFunc(func(op errorfs.Op) error {
		if op.Kind == errorfs.OpFileSync && strings.HasSuffix(op.Path, "blobs") {
			return io.ErrUnexpectedEOF
		}
		return nil
	}))
	w := newWriter(t, fs, 1<<20)
	if _, err := w.Prepare(format.Alignment); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("prepare with a failing directory sync: %v", err)
	}
	if w.Cur != nil {
		t.Fatal("a file whose directory entry was not synced became active")
	}
}

// TestCopiedChunkPieces reads a copied chunk of several copyPiece pieces
// (MemFS: no mapping), checksummed piece by piece: it comes back whole and
// verified, and a byte flipped in a middle piece is a ChunkError with the
// CRC of the bytes as stored.
func TestCopiedChunkPieces(t *testing.T) {
	mem := vfs.NewMem()
	w := newWriter(t, mem, 8<<20)
	e := newTestExtent(t, 7, 2, 2*copyPiece+1000)
	_, off, crcs, err := appendExtent(w, e)
	if err != nil {
		t.Fatal(err)
	}
	_ = w.Close()
	f := NewFile(mem, "/blobs", 1, true, 0, quiet)
	defer f.Release()
	h := e.header(1, off, crcs)
	if b, err := f.Chunk(h, 1, nil, true); err != nil || !bytes.Equal(b, e.chunks[1]) {
		t.Fatalf("copied chunk in pieces: %v", err)
	}
	flip := h.Chunks[1].Offset + copyPiece + 17
	data, err := mem.UnsafeGetFileDataBuffer(f.Path())
	if err != nil {
		t.Fatal(err)
	}
	data[flip] ^= 0x10
	stored := format.CRC(data[h.Chunks[1].Offset : h.Chunks[1].Offset+h.Chunks[1].Length])
	var ce *ChunkError
	if _, err := f.Chunk(h, 1, make([]byte, 0, 3*copyPiece), true); !errors.As(err, &ce) || ce.Computed != stored || ce.Want != crcs[1] {
		t.Fatalf("flipped byte in a middle piece: %v, want a ChunkError computing %08x", err, stored)
	}
}
