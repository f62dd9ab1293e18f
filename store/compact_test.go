package store

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store/internal/bloblog"
)

func mustCompact(t *testing.T, db *DB, o CompactOptions) *CompactReport {
	t.Helper()
	rep, err := db.Compact(context.Background(), o)
	if err != nil {
		t.Fatalf("Compact: %v", err)
	}
	return rep
}

func TestCompactRewritesAndReclaims(t *testing.T) {
	fs := vfs.NewMem()
	o := opsOptions(fs)
	o.CompactLiveRatio = 0.9 // the fixture's files are 2/3 live
	db := openMem(t, fs, o)
	x := newOpsFixture(t, db, fs, 15)
	before := db.Stats()
	var debt uint64
	for _, f := range before.BlobFiles[:len(before.BlobFiles)-1] { // all but the active file
		// Files below the live ratio: a file whose only dead bytes are a
		// tombstone or two (Delete's 4 KiB extents) is above it.
		if float64(f.LiveBytes) < o.CompactLiveRatio*float64(f.LiveBytes+f.DeadBytes) {
			debt += f.DeadBytes
		}
	}
	if before.DeadBytes == 0 || before.CompactionDebt != debt {
		t.Fatalf("fixture: dead %d, debt %d, want %d", before.DeadBytes, before.CompactionDebt, debt)
	}
	var progress atomic.Int64
	rep := mustCompact(t, db, CompactOptions{LiveRatio: 1, Progress: func(done, total int64) {
		if done > total {
			t.Errorf("progress %d of %d", done, total)
		}
		progress.Store(done)
	}})
	if len(rep.Rewritten) == 0 || len(rep.Created) == 0 || rep.Extents == 0 || !onlyActiveSkipped(db, rep) {
		t.Fatalf("report: %+v", rep)
	}
	if uint64(progress.Load()) != rep.BytesCopied {
		t.Fatalf("progress ended at %d, copied %d", progress.Load(), rep.BytesCopied)
	}
	after := db.Stats()
	if after.LiveBytes != before.LiveBytes || after.Packets != before.Packets || after.CompactionDebt != 0 {
		t.Fatalf("live %d -> %d, packets %d -> %d, debt %d", before.LiveBytes, after.LiveBytes, before.Packets, after.Packets, after.CompactionDebt)
	}
	if after.DeadBytes >= before.DeadBytes || after.Compactions != 1 || after.CompactedBytes != rep.BytesCopied {
		t.Fatalf("dead %d -> %d, compactions %d, compacted %d", before.DeadBytes, after.DeadBytes, after.Compactions, after.CompactedBytes)
	}
	for _, num := range rep.Rewritten {
		if _, err := fs.Stat(blobPath(db, num)); err == nil {
			t.Errorf("rewritten file %06d still on disk", num)
		}
	}
	x.checkAll(t, db)
	if c := wantClean(t, db, "after compaction"); len(c.Garbage) != 0 {
		t.Fatalf("garbage after compaction: %+v", c.Garbage)
	}
	if v := mustVerify(t, db); !v.OK() {
		t.Fatalf("Verify after compaction: %v", v.Findings)
	}
	if again := mustCompact(t, db, CompactOptions{LiveRatio: 1}); len(again.Rewritten) != 0 {
		t.Fatalf("second compaction rewrote %v", again.Rewritten)
	}
	// Writes go on after compaction, and the store reopens.
	p := randPacket(x.spec, "ns", 30, 777)
	id, err := db.Put(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	x.packets[id] = p
	db.Close()
	db = openMem(t, fs, opsOptions(fs))
	defer db.Close()
	x.checkAll(t, db)
	wantClean(t, db, "after reopen")
}

// TestCompactKeepsViews: a View taken before compaction reads its bytes
// after it, and the old file is removed only when the View is released.
func TestCompactKeepsViews(t *testing.T) {
	fs := vfs.NewMem()
	db := openMem(t, fs, opsOptions(fs))
	defer db.Close()
	x := newOpsFixture(t, db, fs, 9)
	var id format.PacketID
	var p *Packet
	var v *View
	for id, p = range x.packets {
		var err error
		if v, err = db.Get(context.Background(), "ns", x.spec.Fingerprint(), id); err != nil {
			t.Fatal(err)
		}
		if v.Header().BlobFile != db.w.Cur.Num {
			break
		}
		v.Release()
	}
	old := v.Header().BlobFile
	rep := mustCompact(t, db, CompactOptions{Files: []uint32{old}})
	if len(rep.Rewritten) != 1 {
		t.Fatalf("report: %+v", rep)
	}
	if _, err := fs.Stat(blobPath(db, old)); err != nil {
		t.Fatalf("file %06d removed while a view maps it: %v", old, err)
	}
	if c := wantClean(t, db, "view held"); len(c.Garbage) != 0 {
		t.Fatalf("a retiring file is not garbage: %+v", c.Garbage)
	}
	for l := range p.Layers {
		k, val, err := v.Layer(l)
		if err != nil || string(k) != string(p.Layers[l].K) || string(val) != string(p.Layers[l].V) {
			t.Fatalf("view after compaction: layer %d: %v", l, err)
		}
	}
	v.Release()
	if _, err := fs.Stat(blobPath(db, old)); err == nil {
		t.Fatalf("file %06d still on disk after the last view was released", old)
	}
	checkPacket(t, db, p, id)
}

// TestCompactConcurrentReaders runs readers, a writer and compactions at
// once (run under -race): every read returns the exact packet.
func TestCompactConcurrentReaders(t *testing.T) {
	fs := vfs.NewMem()
	db := openMem(t, fs, opsOptions(fs))
	defer db.Close()
	x := newOpsFixture(t, db, fs, 12)
	fp := x.spec.Fingerprint()
	stable := map[format.PacketID]*Packet{}
	for id, p := range x.packets {
		stable[id] = p
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				if err := readAll(db, fp, stable); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	for i := range 6 {
		p := randPacket(x.spec, "tmp", 60, uint64(500+i))
		id, err := db.Put(context.Background(), p)
		if err != nil {
			t.Fatal(err)
		}
		if err := db.Delete(context.Background(), "tmp", fp, id); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Compact(ctx, CompactOptions{LiveRatio: 1}); err != nil {
			t.Fatal(err)
		}
	}
	cancel()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	x.checkAll(t, db)
	wantClean(t, db, "after concurrent compactions")
}

// TestCompactCrashAtEverySync crashes a compaction at every sync it (and
// the catalog) makes, keeping 0, 50 or 100% of unsynced data: each clone
// opens, checks with no finding, returns every packet bit-exactly, and
// after GC has no garbage but the active file's reusable tail.
func TestCompactCrashAtEverySync(t *testing.T) {
	var x *opsFixture
	clones, _ := crashClones(t, func(fs vfs.FS, l *ledger) {
		db, err := Open("/db", opsOptions(fs))
		if err != nil {
			t.Fatal(err)
		}
		x = newOpsFixture(t, db, fs, 12)
		for id, p := range x.packets {
			l.set(id, p, live)
		}
		for _, id := range x.deleted {
			l.set(id, nil, deleted)
		}
		if _, err := db.Compact(context.Background(), CompactOptions{LiveRatio: 1}); err != nil {
			t.Fatal(err)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	})
	if len(clones) < 30 {
		t.Fatalf("only %d clones", len(clones))
	}
	compacting, garbage := 0, 0
	for _, c := range clones {
		if len(c.states) < len(x.packets)+len(x.deleted) {
			continue // taken while the fixture was being written
		}
		compacting++
		db, err := Open("/db", opsOptions(c.fs))
		if err != nil {
			t.Fatalf("clone %s: Open: %v", c.name, err)
		}
		garbage += len(wantClean(t, db, c.name).Garbage)
		x.checkAll(t, db)
		if _, err := db.GC(context.Background(), GCOptions{}); err != nil {
			t.Fatalf("clone %s: GC: %v", c.name, err)
		}
		rep := wantClean(t, db, c.name+" after GC")
		for _, g := range rep.Garbage {
			if !g.Reused {
				t.Fatalf("clone %s: garbage left after GC: %+v", c.name, g)
			}
		}
		x.checkAll(t, db)
		db.Close()
	}
	if compacting < 6 || garbage == 0 {
		t.Fatalf("%d clones taken during the compaction, %d pieces of garbage in them", compacting, garbage)
	}
}

func TestCompactSkipsCorruptExtent(t *testing.T) {
	fs := vfs.NewMem()
	db := openMem(t, fs, opsOptions(fs))
	defer db.Close()
	newOpsFixture(t, db, fs, 9)
	var h *format.PacketHeader
	_ = db.Headers(func(x *format.PacketHeader) error {
		if h == nil && x.BlobFile != db.w.Cur.Num {
			h = x
		}
		return nil
	})
	c := h.Chunks[1]
	flipMem(t, fs, blobPath(db, c.BlobFile), c.Offset)
	rep := mustCompact(t, db, CompactOptions{Files: []uint32{h.BlobFile}})
	if len(rep.Rewritten) != 0 || len(rep.Skipped) != 1 || rep.Skipped[0].Num != h.BlobFile {
		t.Fatalf("report: %+v", rep)
	}
	wantClean(t, db, "corrupt extent left alone")
}

func TestCompactOptionsAndClosed(t *testing.T) {
	fs := vfs.NewMem()
	db := openMem(t, fs, opsOptions(fs))
	if _, err := db.Compact(context.Background(), CompactOptions{LiveRatio: 1.5}); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("ratio 1.5: %v", err)
	}
	db.Close()
	if _, err := db.Compact(context.Background(), CompactOptions{}); !errors.Is(err, ErrClosed) {
		t.Fatalf("closed: %v", err)
	}
}

// TestCompactCancelAndRestart: a compaction cancelled half way leaves the
// catalog as it was and no output file; run again, it completes.
func TestCompactCancelAndRestart(t *testing.T) {
	fs := vfs.NewMem()
	db := openMem(t, fs, opsOptions(fs))
	defer db.Close()
	x := newOpsFixture(t, db, fs, 15)
	before := db.BlobFiles()
	ctx, cancel := context.WithCancel(context.Background())
	_, err := db.Compact(ctx, CompactOptions{LiveRatio: 1, Progress: func(done, total int64) { cancel() }})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled compaction: %v", err)
	}
	after := db.BlobFiles()
	if len(after) != len(before) {
		t.Fatalf("files %d -> %d after a cancelled compaction", len(before), len(after))
	}
	if rep := wantClean(t, db, "cancelled"); len(rep.Garbage) != 0 {
		t.Fatalf("garbage after a cancelled compaction: %+v", rep.Garbage)
	}
	x.checkAll(t, db)
	if rep := mustCompact(t, db, CompactOptions{LiveRatio: 1}); len(rep.Rewritten) == 0 {
		t.Fatalf("restart: %+v", rep)
	}
	x.checkAll(t, db)
	wantClean(t, db, "restarted")
}

// TestCompactOnDisk runs compaction, Verify, Check and GC on the OS file
// system, mmapped and not, with a view held across the compaction.
func TestCompactOnDisk(t *testing.T) {
	for _, noMmap := range []bool{false, true} {
		dir := t.TempDir()
		o := &Options{FS: vfs.Default, BlobFileSize: 64 << 10, Logger: quiet, DisableMmap: noMmap}
		db, err := Open(dir, o)
		if err != nil {
			t.Fatal(err)
		}
		x := newOpsFixture(t, db, vfs.Default, 12)
		var held *View
		for id := range x.packets {
			if held, err = db.Get(context.Background(), "ns", x.spec.Fingerprint(), id); err != nil {
				t.Fatal(err)
			}
			break
		}
		want := x.packets[held.Header().ID]
		if rep := mustCompact(t, db, CompactOptions{LiveRatio: 1}); len(rep.Rewritten) == 0 {
			t.Fatalf("mmap off %v: nothing rewritten", noMmap)
		}
		for l := range want.Layers {
			k, v, err := held.Layer(l)
			if err != nil || string(k) != string(want.Layers[l].K) || string(v) != string(want.Layers[l].V) {
				t.Fatalf("held view after compaction, layer %d: %v", l, err)
			}
		}
		held.Release()
		x.checkAll(t, db)
		if v := mustVerify(t, db); !v.OK() {
			t.Fatalf("Verify: %v", v.Findings)
		}
		mustGC(t, db)
		if rep := wantClean(t, db, "disk"); len(rep.Garbage) != 0 {
			t.Fatalf("garbage: %+v", rep.Garbage)
		}
		db.Close()
	}
}

// TestCompactCodecs: packets stored with every codec (chunks of differing
// lengths) verify, compact and read back with the same stored bytes.
func TestCompactCodecs(t *testing.T) {
	fs := vfs.NewMem()
	db := openMem(t, fs, &Options{BlobFileSize: 64 << 10})
	defer db.Close()
	spec := testSpec(format.DTypeBF16, 2, 2, 16)
	fp := spec.Fingerprint()
	stored := map[format.PacketID][][]byte{}
	codecs := []format.Codec{format.CodecRaw, format.CodecShuffleZstd, format.CodecInt8, format.CodecInt4}
	for i := range 12 {
		id, err := db.Put(context.Background(), smoothPacket(spec, "ns", 30+i, 0, 0, uint64(i), codecs[i%len(codecs)]))
		if err != nil {
			t.Fatal(err)
		}
		if i%2 == 1 {
			if err := db.Delete(context.Background(), "ns", fp, id); err != nil {
				t.Fatal(err)
			}
			continue
		}
		stored[id] = storedChunks(t, db, fp, id)
	}
	if v := mustVerify(t, db); !v.OK() || v.Extents != int64(len(stored)) {
		t.Fatalf("Verify before: %+v", v)
	}
	if rep := mustCompact(t, db, CompactOptions{LiveRatio: 1}); rep.Extents == 0 {
		t.Fatalf("nothing moved: %+v", rep)
	}
	if v := mustVerify(t, db); !v.OK() {
		t.Fatalf("Verify after: %v", v.Findings)
	}
	wantClean(t, db, "codecs compacted")
	for id, want := range stored {
		got := storedChunks(t, db, fp, id)
		for i := range want {
			if string(got[i]) != string(want[i]) {
				t.Fatalf("packet %s chunk %d changed by compaction", id.Short(), i)
			}
		}
	}
}

// storedChunks returns copies of a packet's stored chunk bytes.
func storedChunks(t *testing.T, db *DB, fp format.Fingerprint, id format.PacketID) [][]byte {
	t.Helper()
	v, err := db.Get(context.Background(), "ns", fp, id)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Release()
	out := make([][]byte, len(v.Header().Chunks))
	for i := range out {
		b, err := v.Chunk(i)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = append([]byte(nil), b...)
	}
	return out
}

// onlyActiveSkipped reports whether the only file rep skipped, if any, is
// the active one, with its reason.
func onlyActiveSkipped(db *DB, rep *CompactReport) bool {
	for _, s := range rep.Skipped {
		if db.w.Cur == nil || s.Num != db.w.Cur.Num || !strings.Contains(s.Reason, "active file") {
			return false
		}
	}
	return true
}

// blobPath is blob file num's path.
func blobPath(db *DB, num uint32) string { return db.fs.PathJoin(db.w.Dir, bloblog.FileName(num)) }
