package store

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store/internal/bloblog"
	"github.com/kvstore/kvstore/store/internal/catalog"
)

func mustCheck(t *testing.T, db *DB, where string) *CheckReport {
	t.Helper()
	rep, err := db.Check(context.Background(), CheckOptions{})
	if err != nil {
		t.Fatalf("%s: Check: %v", where, err)
	}
	return rep
}

func wantClean(t *testing.T, db *DB, where string) *CheckReport {
	t.Helper()
	rep := mustCheck(t, db, where)
	if !rep.OK() {
		t.Fatalf("%s: Check found %d problems: %v", where, len(rep.Findings), rep.Findings)
	}
	return rep
}

func TestCheckHealthy(t *testing.T) {
	fs := vfs.NewMem()
	db := openMem(t, fs, opsOptions(fs))
	x := newOpsFixture(t, db, fs, 14)
	rep := wantClean(t, db, "after puts and deletes")
	if rep.Packets != len(x.packets) || rep.Files < 3 || len(rep.Garbage) != 0 {
		t.Fatalf("report: %+v", rep)
	}
	db.Close()
	db = openMem(t, fs, opsOptions(fs))
	rep = wantClean(t, db, "after reopen")
	if len(rep.Garbage) != 0 {
		t.Fatalf("garbage after a clean reopen: %+v", rep.Garbage)
	}
	db.Close()
}

func TestCheckSpanMemory(t *testing.T) {
	db, _, _ := openSpanDB(t, false)
	defer db.Close()
	_, in := spanFixture(t, 48, 0, format.DTypeF32)
	m := buildSpans(t, db, in, SpanOptions{})
	for _, name := range []string{"a", "b", "a"} { // "a" replaced: its first extent is dead
		if _, err := db.PutSpanMemory(context.Background(), "ns", name, m); err != nil {
			t.Fatal(err)
		}
	}
	rep := wantClean(t, db, "span memories")
	if rep.SpanMemories != 2 {
		t.Fatalf("report: %+v", rep)
	}
}

// TestCheckFindsInconsistencies damages a healthy catalog one way at a
// time and expects exactly the finding kind that names the damage.
func TestCheckFindsInconsistencies(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, db *DB, h *format.PacketHeader)
		want   FindingKind
	}{
		{"index without header", func(t *testing.T, db *DB, h *format.PacketHeader) {
			setKey(t, db, catalog.IndexKey("ns", h.Model, format.PacketID{7}), nil)
		}, FindingIndex},
		{"header without index", func(t *testing.T, db *DB, h *format.PacketHeader) {
			deleteKey(t, db, catalog.IndexKey(h.Namespace, h.Model, h.ID))
		}, FindingIndex},
		{"missing model", func(t *testing.T, db *DB, h *format.PacketHeader) {
			deleteKey(t, db, catalog.ModelKey(h.Model))
		}, FindingModel},
		{"accounting", func(t *testing.T, db *DB, h *format.PacketHeader) {
			r, _ := db.record(h.BlobFile)
			r.LiveBytes -= format.Alignment
			r.DeadBytes += format.Alignment
			setKey(t, db, catalog.BlobFileKey(r.Num), encodeBlobRecord(&r))
		}, FindingAccounting},
		{"dangling file", func(t *testing.T, db *DB, h *format.PacketHeader) {
			deleteKey(t, db, catalog.BlobFileKey(h.BlobFile))
		}, FindingDangling},
		{"overlap", func(t *testing.T, db *DB, h *format.PacketHeader) {
			// A second packet whose header claims the first one's extent.
			p := randPacket(testSpec(format.DTypeBF16, 2, 2, 8), "ns", len(h.TokenIDs), 999)
			id := format.ComputePacketID("ns", h.Model, "", p.TokenIDs)
			c := *h
			c.ID, c.TokenIDs, c.Tokens = id, p.TokenIDs, uint32(len(p.TokenIDs))
			setKey(t, db, catalog.HeaderKey("ns", id), mustEncode(t, &c))
			setKey(t, db, catalog.IndexKey("ns", h.Model, id), nil)
			r, _ := db.record(h.BlobFile)
			r.LiveBytes += h.ExtentLength
			r.Size += h.ExtentLength
			r.LiveExtents++
			r.Extents++
			setKey(t, db, catalog.BlobFileKey(r.Num), encodeBlobRecord(&r))
		}, FindingOverlap},
		{"orphan span head", func(t *testing.T, db *DB, h *format.PacketHeader) {
			setKey(t, db, catalog.SpanHeadKey("ns", "gone", 0, 0), nil)
		}, FindingIndex},
		{"stale pin", func(t *testing.T, db *DB, h *format.PacketHeader) {
			setKey(t, db, catalog.PinKey("ns", format.PacketID{5}), nil)
		}, FindingIndex},
		{"bad record", func(t *testing.T, db *DB, h *format.PacketHeader) {
			setKey(t, db, catalog.HeaderKey("other", format.PacketID{3}), []byte{1, 2, 3})
		}, FindingRecord},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := vfs.NewMem()
			db := openMem(t, fs, opsOptions(fs))
			defer db.Close()
			newOpsFixture(t, db, fs, 6)
			var h *format.PacketHeader
			_ = db.Headers(func(x *format.PacketHeader) error {
				if h == nil {
					h = x
				}
				return nil
			})
			tc.damage(t, db, h)
			rep := mustCheck(t, db, tc.name)
			if rep.OK() || !hasFinding(rep.Findings, func(f Finding) bool { return f.Kind == tc.want }) {
				t.Fatalf("want a %s finding, got %v", tc.want, rep.Findings)
			}
		})
	}
}

func mustEncode(t *testing.T, h *format.PacketHeader) []byte {
	t.Helper()
	v, err := format.EncodeHeader(h)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func setKey(t *testing.T, db *DB, k, v []byte) {
	t.Helper()
	b := db.cat.DB.NewBatch()
	_ = b.Set(k, v, nil)
	if err := db.commit(b); err != nil {
		t.Fatal(err)
	}
}

func deleteKey(t *testing.T, db *DB, k []byte) {
	t.Helper()
	b := db.cat.DB.NewBatch()
	_ = b.Delete(k, nil)
	if err := db.commit(b); err != nil {
		t.Fatal(err)
	}
}

// TestCheckGarbage: an unreferenced blob file and bytes past a file's
// catalogued size are garbage, not findings.
func TestCheckGarbage(t *testing.T) {
	fs := vfs.NewMem()
	db := openMem(t, fs, opsOptions(fs))
	newOpsFixture(t, db, fs, 6)
	files := db.BlobFiles()
	db.Close()
	// An orphan file holding one extent, and a tail on the first file.
	orphan := fs.PathJoin("/db/blobs", bloblog.FileName(900))
	writeFileAt(t, fs, orphan, 0, format.EncodeBlobHeader(900))
	tr := format.Trailer{Packet: format.PacketID{9}, Offset: format.BlobHeaderSize}
	writeFileAt(t, fs, orphan, 2*format.Alignment-format.TrailerSize, tr.Encode())
	first := files[0]
	writeFileAt(t, fs, first.Path, first.Size+100, []byte("junk"))

	db = openMem(t, fs, opsOptions(fs))
	defer db.Close()
	rep := wantClean(t, db, "with garbage")
	if len(rep.Garbage) != 2 {
		t.Fatalf("garbage: %+v", rep.Garbage)
	}
	for _, g := range rep.Garbage {
		switch g.Kind {
		case GarbageFile:
			if g.Num != 900 || g.Extents != 1 || g.Length != 2*format.Alignment {
				t.Errorf("orphan file: %+v", g)
			}
		case GarbageTail:
			if g.Num != first.Num || g.Offset != first.Size || g.Length != 104 || g.Reused {
				t.Errorf("tail: %+v", g)
			}
		default:
			t.Errorf("unexpected garbage %+v", g)
		}
	}
}

func writeFileAt(t *testing.T, fs vfs.FS, path string, off uint64, b []byte) {
	t.Helper()
	f, err := fs.OpenReadWrite(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(b, int64(off)); err != nil {
		t.Fatal(err)
	}
}

// TestCheckAfterCrash: every crash clone of a put/delete workload opens
// and checks with no finding (garbage allowed), and Verify finds nothing.
func TestCheckAfterCrash(t *testing.T) {
	clones, _ := crashClones(t, func(fs vfs.FS, l *ledger) { crashWorkload(t, fs, l) })
	for _, c := range clones {
		db, err := Open("/db", &Options{FS: c.fs, BlobFileSize: 24 << 10, Logger: quiet})
		if err != nil {
			t.Fatalf("clone %s: Open: %v", c.name, err)
		}
		wantClean(t, db, c.name)
		if rep := mustVerify(t, db); !rep.OK() {
			t.Fatalf("clone %s: Verify: %v", c.name, rep.Findings)
		}
		db.Close()
	}
}

// crashClones runs work on a crashable file system and returns crash
// clones taken before every sync and at the end, at 0, 50 and 100% of the
// unsynced data kept.
func crashClones(t *testing.T, work func(fs vfs.FS, l *ledger)) ([]crashClone, *ledger) {
	t.Helper()
	return crashClonesSeeded(t, 3, 4, work)
}

// crashClonesSeeded is crashClones with the seeds of the generator that
// picks which unsynced data each clone keeps.
func crashClonesSeeded(t *testing.T, seed1, seed2 uint64, work func(fs vfs.FS, l *ledger)) ([]crashClone, *ledger) {
	t.Helper()
	mem := vfs.NewCrashableMem()
	l := newLedger()
	rng := rand.New(rand.NewPCG(seed1, seed2))
	var mu sync.Mutex
	var clones []crashClone
	take := func(why string) {
		mu.Lock()
		defer mu.Unlock()
		l.frozen(func(states map[format.PacketID]packetState) {
			for _, pct := range []int{0, 50, 100} {
				fs := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: pct, RNG: rand.New(rand.NewPCG(rng.Uint64(), 0))})
				clones = append(clones, crashClone{fmt.Sprintf("%d-%s-%d%%", len(clones), why, pct), fs, states})
			}
		})
	}
	hook := errorfs.InjectorFunc(func(op errorfs.Op) error {
		if op.Kind == errorfs.OpFileSync || op.Kind == errorfs.OpFileSyncData {
			take(op.Path)
		}
		return nil
	})
	work(errorfs.Wrap(mem, hook), l)
	take("end")
	return clones, l
}

// TestCheckAfterSpanMemoryCrash: crash clones of span memory writes,
// replacements and deletes check and verify clean.
func TestCheckAfterSpanMemoryCrash(t *testing.T) {
	_, in := spanFixture(t, 48, 0, format.DTypeF32)
	clones, _ := crashClones(t, func(fs vfs.FS, l *ledger) {
		db, err := Open("/db", &Options{FS: fs, BlobFileSize: 64 << 10, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		m := buildSpans(t, db, in, SpanOptions{})
		for _, name := range []string{"a", "b", "a"} {
			if _, err := db.PutSpanMemory(context.Background(), "ns", name, m); err != nil {
				t.Fatal(err)
			}
		}
		if err := db.DeleteSpanMemory(context.Background(), "ns", m.Model.Fingerprint(), "b"); err != nil {
			t.Fatal(err)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	})
	for i, c := range clones {
		if i%3 != 0 {
			continue
		}
		db, err := Open("/db", &Options{FS: c.fs, BlobFileSize: 64 << 10, Logger: quiet})
		if err != nil {
			t.Fatalf("clone %s: %v", c.name, err)
		}
		wantClean(t, db, c.name)
		if v := mustVerify(t, db); !v.OK() {
			t.Fatalf("clone %s: Verify: %v", c.name, v.Findings)
		}
		mustGC(t, db)
		wantClean(t, db, c.name+" after GC")
		db.Close()
	}
}
