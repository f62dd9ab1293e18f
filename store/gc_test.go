package store

import (
	"context"
	"slices"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store/internal/bloblog"
)

func mustGC(t *testing.T, db *DB) *GCReport {
	t.Helper()
	rep, err := db.GC(context.Background(), GCOptions{})
	if err != nil {
		t.Fatalf("GC: %v", err)
	}
	return rep
}

// TestGCReclaimsGarbage plants every kind of garbage: an unreferenced
// file, a tail on a sealed file and one on the active file, and a fully
// dead sealed file. GC removes all but the active tail, Check stays
// clean, and every packet reads back.
func TestGCReclaimsGarbage(t *testing.T) {
	fs := vfs.NewMem()
	db := openMem(t, fs, opsOptions(fs))
	x := newOpsFixture(t, db, fs, 12)
	// Kill every packet of the first file.
	files := db.BlobFiles()
	first, tailed := files[0], files[1]
	_ = db.Headers(func(h *format.PacketHeader) error {
		if h.BlobFile == first.Num {
			if err := db.Delete(context.Background(), h.Namespace, h.Model, h.ID); err != nil {
				t.Fatal(err)
			}
			delete(x.packets, h.ID)
			x.deleted = append(x.deleted, h.ID)
		}
		return nil
	})
	active := db.w.Cur.Num
	files = append(files[:len(files)-1], db.BlobFiles()[len(files)-1]) // the active file grew by the tombstones
	db.Close()
	orphan := fs.PathJoin("/db/blobs", bloblog.FileName(500))
	writeFileAt(t, fs, orphan, 0, format.EncodeBlobHeader(500))
	writeFileAt(t, fs, tailed.Path, tailed.Size+format.Alignment-1, []byte{1})
	activeRec := files[len(files)-1]
	writeFileAt(t, fs, activeRec.Path, activeRec.Size+10, []byte{1})

	db = openMem(t, fs, opsOptions(fs))
	defer db.Close()
	if rep := wantClean(t, db, "planted garbage"); len(rep.Garbage) != 3 {
		t.Fatalf("garbage: %+v", rep.Garbage)
	}
	dry, err := db.GC(context.Background(), GCOptions{DryRun: true})
	if err != nil {
		t.Fatalf("GC dry run: %v", err)
	}
	if r := wantClean(t, db, "after a GC dry run"); len(r.Garbage) != 3 {
		t.Fatalf("a GC dry run changed the garbage: %+v", r.Garbage)
	}
	rep := mustGC(t, db)
	if !slices.Equal(dry.FilesRemoved, rep.FilesRemoved) || !slices.Equal(dry.RecordsRemoved, rep.RecordsRemoved) ||
		dry.Compaction == nil || !slices.Equal(dry.Compaction.Rewritten, rep.Compaction.Rewritten) {
		t.Fatalf("GC dry run %+v, real GC %+v", dry, rep)
	}
	if !slices.Contains(rep.FilesRemoved, 500) || !slices.Contains(rep.FilesRemoved, first.Num) ||
		!slices.Contains(rep.RecordsRemoved, first.Num) || rep.Compaction == nil ||
		!slices.Contains(rep.Compaction.Rewritten, tailed.Num) || rep.BytesReclaimed == 0 {
		t.Fatalf("GC report: %+v (compaction %+v)", rep, rep.Compaction)
	}
	c := wantClean(t, db, "after GC")
	if len(c.Garbage) != 1 || c.Garbage[0].Num != active || !c.Garbage[0].Reused {
		t.Fatalf("garbage after GC: %+v", c.Garbage)
	}
	for _, num := range []uint32{500, first.Num, tailed.Num} {
		if _, err := fs.Stat(blobPath(db, num)); err == nil {
			t.Errorf("file %06d still on disk", num)
		}
	}
	x.checkAll(t, db)
	if again := mustGC(t, db); len(again.FilesRemoved)+len(again.RecordsRemoved) != 0 || again.Compaction != nil {
		t.Fatalf("second GC did something: %+v", again)
	}
	if s := db.Stats(); s.GCRuns != 2 {
		t.Fatalf("GCRuns %d", s.GCRuns)
	}
	// The active file's tail is overwritten by the next write.
	p := randPacket(x.spec, "ns", 20, 4242)
	id, err := db.Put(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	checkPacket(t, db, p, id)
	wantClean(t, db, "after a write over the tail")
}

// TestGCAfterCrashedPuts: crash clones of the put/delete workload, after
// GC, have no garbage but reusable active tails, and keep every packet.
func TestGCAfterCrashedPuts(t *testing.T) {
	clones, l := crashClones(t, func(fs vfs.FS, l *ledger) { crashWorkload(t, fs, l) })
	garbage := 0
	for i, c := range clones {
		if i%2 == 1 {
			continue // half of them is plenty
		}
		db, err := Open("/db", &Options{FS: c.fs, BlobFileSize: 24 << 10, Logger: quiet})
		if err != nil {
			t.Fatalf("clone %s: %v", c.name, err)
		}
		garbage += len(mustCheck(t, db, c.name).Garbage)
		mustGC(t, db)
		for _, g := range wantClean(t, db, c.name+" after GC").Garbage {
			if !g.Reused {
				t.Fatalf("clone %s: garbage after GC: %+v", c.name, g)
			}
		}
		for id, st := range c.states {
			if st == live {
				checkPacket(t, db, l.packets[id], id)
			}
		}
		db.Close()
	}
	if garbage == 0 {
		t.Fatal("no clone had garbage: the test tests nothing")
	}
}

// TestGCCrashAtEverySync crashes a GC (records dropped, files removed, a
// tail rewritten) at every sync: each clone opens clean with every packet.
func TestGCCrashAtEverySync(t *testing.T) {
	var x *opsFixture
	clones, _ := crashClones(t, func(fs vfs.FS, l *ledger) {
		db, err := Open("/db", opsOptions(fs))
		if err != nil {
			t.Fatal(err)
		}
		x = newOpsFixture(t, db, fs, 12)
		files := db.BlobFiles()
		_ = db.Headers(func(h *format.PacketHeader) error { // the first file dies
			if h.BlobFile == files[0].Num {
				if err := db.Delete(context.Background(), h.Namespace, h.Model, h.ID); err != nil {
					t.Fatal(err)
				}
				delete(x.packets, h.ID)
				x.deleted = append(x.deleted, h.ID)
			}
			return nil
		})
		writeFileAt(t, fs, files[1].Path, files[1].Size, []byte("crashed append"))
		for id, p := range x.packets {
			l.set(id, p, live)
		}
		if _, err := db.GC(context.Background(), GCOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
	})
	n := 0
	for _, c := range clones {
		if len(c.states) == 0 {
			continue
		}
		n++
		db, err := Open("/db", opsOptions(c.fs))
		if err != nil {
			t.Fatalf("clone %s: %v", c.name, err)
		}
		wantClean(t, db, c.name)
		x.checkAll(t, db)
		mustGC(t, db)
		wantClean(t, db, c.name+" after GC")
		db.Close()
	}
	if n < 3 {
		t.Fatalf("only %d clones during GC", n)
	}
}
