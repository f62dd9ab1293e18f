package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/kvstore/kvstore/format"
)

// spanBlocks reads every block of r's memory, copied: each layer's
// resident K and V, and each factored span's K and V factors of every head.
func spanBlocks(t *testing.T, r *SpanReader) map[string][]byte {
	t.Helper()
	m := r.Meta()
	out := map[string][]byte{}
	for l := range m.Layers {
		k, v, err := r.Resident(l)
		if err != nil {
			t.Fatalf("layer %d resident: %v", l, err)
		}
		out[fmt.Sprintf("resident %d K", l)] = bytes.Clone(k)
		out[fmt.Sprintf("resident %d V", l)] = bytes.Clone(v)
		for h := range m.KVHeads {
			sums, err := r.Summaries(l, h)
			if err != nil {
				t.Fatalf("layer %d head %d summaries: %v", l, h, err)
			}
			out[fmt.Sprintf("summary %d %d", l, h)] = fmt.Appendf(nil, "%v", sums)
			for s, sp := range m.Spans {
				if !sp.Factored {
					continue
				}
				for _, kind := range []format.ChunkKind{format.ChunkK, format.ChunkV} {
					b, err := r.FactorBytes(l, h, s, kind)
					if err != nil {
						t.Fatalf("layer %d head %d span %d %v: %v", l, h, s, kind, err)
					}
					out[fmt.Sprintf("%d %d %d %v", l, h, s, kind)] = bytes.Clone(b)
				}
			}
		}
	}
	return out
}

// sameBlocks fails unless got and want hold the same blocks, bit for bit.
func sameBlocks(t *testing.T, where string, got, want map[string][]byte) {
	t.Helper()
	if len(got) != len(want) || len(want) == 0 {
		t.Fatalf("%s: %d blocks, want %d", where, len(got), len(want))
	}
	if factorBlocks(want) == 0 {
		t.Fatalf("%s: the memory has no factored span to compare", where)
	}
	for k, w := range want {
		if !bytes.Equal(got[k], w) {
			t.Fatalf("%s: block %s differs", where, k)
		}
	}
}

// factorBlocks counts the factor blocks among spanBlocks' keys.
func factorBlocks(blocks map[string][]byte) int {
	n := 0
	for k := range blocks {
		if !strings.HasPrefix(k, "resident") && !strings.HasPrefix(k, "summary") {
			n++
		}
	}
	return n
}

// openBlocks opens (ns, name) and reads all its blocks.
func openBlocks(t *testing.T, db *DB, model format.Fingerprint, ns, name string) (map[string][]byte, *SpanMeta) {
	t.Helper()
	r, err := db.OpenSpanMemory(context.Background(), ns, model, name)
	if err != nil {
		t.Fatalf("open %q: %v", name, err)
	}
	defer r.Release()
	return spanBlocks(t, r), r.Meta()
}

// Compaction moves live span memory extents: readers opened before read
// on, bit-exactly, whether they read a head before or after the move; the
// store is clean and everything reads back after a reopen; a memory
// replaced after the move is ErrNotFound to a reader of the old one.
func TestCompactMovesSpanMemories(t *testing.T) {
	fs := vfs.NewMem()
	db := openMem(t, fs, &Options{BlobFileSize: MinBlobFileSize}) // one extent per file
	_, in := spanFixture(t, 100, 0, format.DTypeF32)
	m := buildSpans(t, db, in, SpanOptions{})
	fp := m.Model.Fingerprint()
	for _, name := range []string{"a", "a", "b"} { // the first extent dies
		if _, err := db.PutSpanMemory(context.Background(), "ns", name, m); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.Put(context.Background(), randPacket(testSpec(format.DTypeBF16, 2, 2, 8), "ns", 10, 1)); err != nil {
		t.Fatal(err) // seals the live span memories' files
	}
	want, before := openBlocks(t, db, fp, "ns", "a")
	early, err := db.OpenSpanMemory(context.Background(), "ns", fp, "a") // reads head (0, 0) before the move, the rest after
	if err != nil {
		t.Fatal(err)
	}
	defer early.Release()
	if _, err := early.Head(0, 0); err != nil {
		t.Fatal(err)
	}
	stale, err := db.OpenSpanMemory(context.Background(), "ns", fp, "a") // reads nothing until the memory is replaced
	if err != nil {
		t.Fatal(err)
	}
	defer stale.Release()
	rep := mustCompact(t, db, CompactOptions{LiveRatio: 1}) // retires the dead extent's file
	if len(rep.Rewritten) != 1 || rep.Extents != 0 || len(rep.Skipped) != 0 {
		t.Fatalf("dead file: %+v", rep)
	}
	bMeta, err := db.spanMeta("ns", "b")
	if err != nil {
		t.Fatal(err)
	}
	rep = mustCompact(t, db, CompactOptions{Files: []uint32{before.BlobFile, bMeta.BlobFile}})
	if len(rep.Rewritten) != 2 || rep.Extents != 2 || len(rep.Skipped) != 0 || rep.BytesCopied != 2*before.ExtentLength {
		t.Fatalf("span files: %+v", rep)
	}
	got, after := openBlocks(t, db, fp, "ns", "a")
	if after.BlobFile == before.BlobFile || after.Context != before.Context {
		t.Fatalf("not moved: file %d -> %d", before.BlobFile, after.BlobFile)
	}
	sameBlocks(t, "after compaction", got, want)
	sameBlocks(t, "reader opened before compaction", spanBlocks(t, early), want)
	wantClean(t, db, "after span compaction")
	if vr := mustVerify(t, db); len(vr.Findings) != 0 || vr.Extents != 3 {
		t.Fatalf("verify: %+v", vr)
	}
	if _, err := db.PutSpanMemory(context.Background(), "ns", "a", m); err != nil { // replace: a new write
		t.Fatal(err)
	}
	if _, err := stale.Head(1, 1); !errors.Is(err, ErrNotFound) {
		t.Fatalf("head of a replaced memory, first read after the move: %v", err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = openMem(t, fs, &Options{BlobFileSize: MinBlobFileSize})
	defer db.Close()
	for _, name := range []string{"a", "b"} {
		got, _ := openBlocks(t, db, fp, "ns", name)
		sameBlocks(t, "reopened "+name, got, want)
	}
	wantClean(t, db, "reopened")
}

// A crash at every sync of a compaction that moves span memories leaves a
// store that opens clean and reads every memory bit-exactly, moved or not;
// GC then leaves no garbage.
func TestCompactSpanCrashAtEverySync(t *testing.T) {
	var x *opsFixture
	var fp format.Fingerprint
	var want map[string][]byte
	var before map[string]uint32 // blob file of each live memory before compaction
	names, gone := []string{"s1", "s2"}, "s3"
	clones, _ := crashClones(t, func(fs vfs.FS, l *ledger) {
		db, err := Open("/db", opsOptions(fs))
		if err != nil {
			t.Fatal(err)
		}
		_, in := spanFixture(t, 24, 0, format.DTypeBF16)
		m := buildSpans(t, db, in, SpanOptions{})
		fp = m.Model.Fingerprint()
		for _, name := range []string{"s1", "s2", "s3", "s2"} { // the first s2 dies
			if _, err := db.PutSpanMemory(context.Background(), "ns", name, m); err != nil {
				t.Fatal(err)
			}
		}
		if err := db.DeleteSpanMemory(context.Background(), "ns", fp, gone); err != nil {
			t.Fatal(err)
		}
		before = map[string]uint32{}
		for _, name := range names {
			var meta *SpanMeta
			want, meta = openBlocks(t, db, fp, "ns", name)
			before[name] = meta.BlobFile
		}
		x = newOpsFixture(t, db, fs, 9)
		for id, p := range x.packets {
			l.set(id, p, live)
		}
		for _, id := range x.deleted {
			l.set(id, nil, deleted)
		}
		var files []uint32
		for _, f := range db.BlobFiles() {
			files = append(files, f.Num)
		}
		rep, err := db.Compact(context.Background(), CompactOptions{Files: files})
		if err != nil || !onlyActiveSkipped(db, rep) {
			t.Fatalf("compact: %+v, %v", rep, err)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	})
	compacting, moved := 0, 0
	for _, c := range clones {
		if len(c.states) < len(x.packets)+len(x.deleted) {
			continue // taken while the fixture was being written
		}
		compacting++
		db, err := Open("/db", opsOptions(c.fs))
		if err != nil {
			t.Fatalf("clone %s: Open: %v", c.name, err)
		}
		check := func(where string) {
			wantClean(t, db, where)
			x.checkAll(t, db)
			for _, name := range names {
				got, meta := openBlocks(t, db, fp, "ns", name)
				sameBlocks(t, where+" "+name, got, want)
				if meta.BlobFile != before[name] {
					moved++
				}
			}
			if _, err := db.OpenSpanMemory(context.Background(), "ns", fp, gone); !errors.Is(err, ErrNotFound) {
				t.Fatalf("%s: deleted memory: %v", where, err)
			}
		}
		check("clone " + c.name)
		if _, err := db.GC(context.Background(), GCOptions{}); err != nil {
			t.Fatalf("clone %s: GC: %v", c.name, err)
		}
		for _, g := range wantClean(t, db, c.name+" after GC").Garbage {
			if !g.Reused {
				t.Fatalf("clone %s: garbage left after GC: %+v", c.name, g)
			}
		}
		check("clone " + c.name + " after GC")
		db.Close()
	}
	if compacting < 6 || moved == 0 {
		t.Fatalf("%d clones taken during the compaction, %d memories moved in them", compacting, moved)
	}
}

// Readers of a span memory, opened before and during compactions that
// move it back and forth, read the same bytes throughout (run with -race).
func TestCompactSpanConcurrentReaders(t *testing.T) {
	fs := vfs.NewMem()
	db := openMem(t, fs, &Options{BlobFileSize: MinBlobFileSize})
	defer db.Close()
	_, in := spanFixture(t, 100, 0, format.DTypeF32)
	m := buildSpans(t, db, in, SpanOptions{})
	fp := m.Model.Fingerprint()
	if _, err := db.PutSpanMemory(context.Background(), "ns", "a", m); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Put(context.Background(), randPacket(testSpec(format.DTypeBF16, 2, 2, 8), "ns", 10, 1)); err != nil {
		t.Fatal(err)
	}
	want, _ := openBlocks(t, db, fp, "ns", "a")
	stop := make(chan struct{})
	errs := make(chan error, 4)
	for range 4 {
		go func() {
			errs <- readUntil(db, fp, want, stop)
		}()
	}
	for range 6 {
		meta, err := db.spanMeta("ns", "a")
		if err != nil {
			t.Fatal(err)
		}
		if rep := mustCompact(t, db, CompactOptions{Files: []uint32{meta.BlobFile}}); rep.Extents != 1 {
			t.Fatalf("compaction moved %d extents: %+v", rep.Extents, rep)
		}
	}
	close(stop)
	for range 4 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	wantClean(t, db, "after concurrent compactions")
}

// readUntil opens (ns, "a") again and again, reading every factor block
// and comparing it with want, until stop is closed.
func readUntil(db *DB, fp format.Fingerprint, want map[string][]byte, stop chan struct{}) error {
	for {
		select {
		case <-stop:
			return nil
		default:
		}
		r, err := db.OpenSpanMemory(context.Background(), "ns", fp, "a")
		if err != nil {
			return err
		}
		m := r.Meta()
		for l := range m.Layers {
			for h := range m.KVHeads {
				for s, sp := range m.Spans {
					if !sp.Factored {
						continue
					}
					b, err := r.FactorBytes(l, h, s, format.ChunkV)
					if err != nil {
						r.Release()
						return err
					}
					if !bytes.Equal(b, want[fmt.Sprintf("%d %d %d %v", l, h, s, format.ChunkV)]) {
						r.Release()
						return fmt.Errorf("layer %d head %d span %d: factors differ", l, h, s)
					}
				}
			}
		}
		r.Release()
	}
}
