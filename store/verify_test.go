package store

import (
	"context"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store/internal/catalog"
)

// opsFixture is a store with packets spread over several small blob
// files, some deleted, and a span memory.
type opsFixture struct {
	fs      vfs.FS
	spec    *format.ModelSpec
	packets map[format.PacketID]*Packet // live ones
	deleted []format.PacketID
}

// opsOptions are the options the operations tests open stores with.
func opsOptions(fs vfs.FS) *Options {
	return &Options{FS: fs, BlobFileSize: 64 << 10, Logger: quiet}
}

// newOpsFixture puts n packets (5-21 KiB extents over 64 KiB files) and
// deletes every third.
func newOpsFixture(t *testing.T, db *DB, fs vfs.FS, n int) *opsFixture {
	t.Helper()
	x := &opsFixture{fs: fs, spec: testSpec(format.DTypeBF16, 2, 2, 8), packets: map[format.PacketID]*Packet{}}
	for i := range n {
		p := randPacket(x.spec, "ns", 40+100*(i%3), uint64(i)+1)
		id, err := db.Put(context.Background(), p)
		if err != nil {
			t.Fatal(err)
		}
		x.packets[id] = p
		if i%3 == 1 {
			if err := db.Delete(context.Background(), "ns", x.spec.Fingerprint(), id); err != nil {
				t.Fatal(err)
			}
			delete(x.packets, id)
			x.deleted = append(x.deleted, id)
		}
	}
	return x
}

// checkAll reads every live packet of x back bit-exactly.
func (x *opsFixture) checkAll(t *testing.T, db *DB) {
	t.Helper()
	for id, p := range x.packets {
		checkPacket(t, db, p, id)
	}
	for _, id := range x.deleted {
		if ok, err := db.Has(context.Background(), "ns", x.spec.Fingerprint(), id); err != nil || ok {
			t.Fatalf("deleted packet %s: Has = %v, %v", id.Short(), ok, err)
		}
	}
}

func mustVerify(t *testing.T, db *DB) *VerifyReport {
	t.Helper()
	rep, err := db.Verify(context.Background(), VerifyOptions{})
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	return rep
}

func TestVerifyHealthy(t *testing.T) {
	fs := vfs.NewMem()
	db := openMem(t, fs, opsOptions(fs))
	x := newOpsFixture(t, db, fs, 12)
	var calls int
	var last int64
	rep, err := db.Verify(context.Background(), VerifyOptions{Progress: func(done, total int64) {
		calls++
		if done < last || done > total {
			t.Errorf("progress %d of %d after %d", done, total, last)
		}
		last = done
	}})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() || rep.Extents != int64(len(x.packets)) || rep.Chunks != 4*int64(len(x.packets)) {
		t.Fatalf("healthy store: %+v", rep)
	}
	if calls != len(x.packets) || last != rep.Bytes {
		t.Fatalf("progress called %d times, last %d; report %+v", calls, last, rep)
	}
	db.Close()
}

// TestVerifyFindsEveryBadChunk flips one byte in two chunks of different
// packets and one trailer: each is reported with its file, offset, packet,
// layer and kind, and the walk goes on past them.
func TestVerifyFindsEveryBadChunk(t *testing.T) {
	fs := vfs.NewMem()
	db := openMem(t, fs, opsOptions(fs))
	x := newOpsFixture(t, db, fs, 9)
	var hs []*format.PacketHeader
	if err := db.Headers(func(h *format.PacketHeader) error { hs = append(hs, h); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(hs) != len(x.packets) || len(hs) < 3 {
		t.Fatalf("%d headers", len(hs))
	}
	bad := []struct {
		h     *format.PacketHeader
		chunk int
	}{{hs[0], 3}, {hs[1], 0}}
	for _, b := range bad {
		c := b.h.Chunks[b.chunk]
		flipMem(t, fs, blobPath(db, c.BlobFile), c.Offset+c.Length/2)
	}
	th := hs[2]
	flipMem(t, fs, blobPath(db, th.BlobFile), th.ExtentOffset+th.ExtentLength-10) // trailer CRC field
	rep := mustVerify(t, db)
	if len(rep.Findings) != 3 {
		t.Fatalf("want 3 findings, got %d: %v", len(rep.Findings), rep.Findings)
	}
	for _, b := range bad {
		c := b.h.Chunks[b.chunk]
		if !hasFinding(rep.Findings, func(f Finding) bool {
			return f.Kind == FindingChunkCRC && f.ID == b.h.ID && f.Offset == c.Offset && f.Length == c.Length &&
				f.Layer == int(c.Layer) && f.Chunk == c.Kind && f.File == blobPath(db, c.BlobFile)
		}) {
			t.Errorf("chunk %d of %s not reported: %v", b.chunk, b.h.ID.Short(), rep.Findings)
		}
	}
	if !hasFinding(rep.Findings, func(f Finding) bool { return f.Kind == FindingTrailer && f.ID == th.ID }) {
		t.Errorf("bad trailer of %s not reported: %v", th.ID.Short(), rep.Findings)
	}
	if rep.Extents != int64(len(hs)) {
		t.Errorf("read %d extents of %d: the walk stopped", rep.Extents, len(hs))
	}
	rep, err := db.Verify(context.Background(), VerifyOptions{MaxFindings: 1})
	if err != nil || len(rep.Findings) != 1 || !rep.Truncated {
		t.Fatalf("MaxFindings 1: %+v, %v", rep, err)
	}
	// Two more bad chunks in hs[0]: its extent alone holds 3 findings, and
	// a limit of 2 still reports exactly 2.
	for _, i := range []int{0, 1} {
		c := hs[0].Chunks[i]
		flipMem(t, fs, blobPath(db, c.BlobFile), c.Offset+c.Length/2)
	}
	rep, err = db.Verify(context.Background(), VerifyOptions{MaxFindings: 2})
	if err != nil || len(rep.Findings) != 2 || !rep.Truncated {
		t.Fatalf("MaxFindings 2 with 3 findings in one extent: %d findings, truncated %v, %v", len(rep.Findings), rep.Truncated, err)
	}
	db.Close()
}

func TestVerifyUndecodableHeaderAndPastEnd(t *testing.T) {
	fs := vfs.NewMem()
	db := openMem(t, fs, opsOptions(fs))
	x := newOpsFixture(t, db, fs, 6)
	var first *format.PacketHeader
	_ = db.Headers(func(h *format.PacketHeader) error {
		if first == nil {
			first = h
		}
		return nil
	})
	// A garbage header value and a header pointing past its file's end.
	b := db.cat.DB.NewBatch()
	_ = b.Set(catalog.HeaderKey("ns", format.PacketID{1}), []byte("not a header"), nil)
	moved := *first
	moved.ExtentOffset += 1 << 20
	moved.Chunks = append([]format.ChunkDesc(nil), first.Chunks...)
	for i := range moved.Chunks {
		moved.Chunks[i].Offset += 1 << 20
	}
	v, err := format.EncodeHeader(&moved)
	if err != nil {
		t.Fatal(err)
	}
	_ = b.Set(catalog.HeaderKey(first.Namespace, first.ID), v, nil)
	if err := db.commit(b); err != nil {
		t.Fatal(err)
	}
	rep := mustVerify(t, db)
	if len(rep.Findings) != 2 ||
		!hasFinding(rep.Findings, func(f Finding) bool { return f.Kind == FindingRecord }) ||
		!hasFinding(rep.Findings, func(f Finding) bool { return f.Kind == FindingDangling && f.ID == first.ID }) {
		t.Fatalf("findings: %v", rep.Findings)
	}
	if rep.Extents != int64(len(x.packets)-1) {
		t.Fatalf("read %d extents, want %d", rep.Extents, len(x.packets)-1)
	}
	db.Close()
}

func TestVerifySpanMemory(t *testing.T) {
	db, fs, _ := openSpanDB(t, false)
	defer db.Close()
	_, in := spanFixture(t, 48, 0, format.DTypeF32)
	m := buildSpans(t, db, in, SpanOptions{})
	if _, err := db.PutSpanMemory(context.Background(), "ns", "ctx", m); err != nil {
		t.Fatal(err)
	}
	rep := mustVerify(t, db)
	if !rep.OK() || rep.Extents != 1 || rep.Chunks < int64(2*m.Model.Layers) {
		t.Fatalf("healthy span memory: %+v", rep)
	}
	meta, err := db.spanMeta("ns", "ctx")
	if err != nil {
		t.Fatal(err)
	}
	blk := meta.Blocks[1]
	if blk.Length == 0 {
		t.Skip("no resident rows in this fixture")
	}
	flipMem(t, fs, blobPath(db, meta.BlobFile), meta.ExtentOffset+blk.VOffset)
	rep = mustVerify(t, db)
	if len(rep.Findings) < 1 || !hasFinding(rep.Findings, func(f Finding) bool {
		return f.Kind == FindingChunkCRC && f.Context == "ctx" && f.Layer == 1 && f.Chunk == format.ChunkV &&
			f.Offset == meta.ExtentOffset+blk.VOffset
	}) {
		t.Fatalf("bad resident block not reported: %v", rep.Findings)
	}
}

// flipMem flips a bit of a MemFS file in place (the store may be open:
// MemFS reads copy).
func flipMem(t *testing.T, fs vfs.FS, path string, off uint64) {
	t.Helper()
	b, err := fs.(*vfs.MemFS).UnsafeGetFileDataBuffer(path)
	if err != nil {
		t.Fatal(err)
	}
	b[off] ^= 0x10
}

func hasFinding(fs []Finding, pred func(Finding) bool) bool {
	for _, f := range fs {
		if pred(f) {
			return true
		}
	}
	return false
}
