package store

import (
	"context"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/kvstore/kvstore/format"
)

// rollFixture puts n packets into one active blob file (1 GiB seal size)
// and deletes all but the ones keep names.
func rollFixture(t *testing.T, fs vfs.FS, n int, keep func(i int) bool) (*DB, map[format.PacketID]*Packet) {
	t.Helper()
	db := openMem(t, fs, &Options{FS: fs, Logger: quiet, BlobFileSize: 1 << 30})
	spec := testSpec(format.DTypeBF16, 2, 2, 8)
	kept := map[format.PacketID]*Packet{}
	for i := range n {
		p := randPacket(spec, "ns", 100, uint64(i)+1)
		id, err := db.Put(context.Background(), p)
		if err != nil {
			t.Fatal(err)
		}
		if keep(i) {
			kept[id] = p
		} else if err := db.Delete(context.Background(), "ns", spec.Fingerprint(), id); err != nil {
			t.Fatal(err)
		}
	}
	if fs := db.BlobFiles(); len(fs) != 1 || fs[0].Sealed {
		t.Fatalf("fixture: %+v, want one active file", fs)
	}
	return db, kept
}

// Compact rolls the active file once its dead bytes dominate it, and
// rewrites it: the deleted bytes are reclaimed without waiting for the
// file to fill (1 GiB) or the store to restart, every kept packet reads
// back, and the next Put starts a new file. A reopened store agrees.
func TestCompactRollsActiveFile(t *testing.T) {
	fs := vfs.NewMem()
	db, kept := rollFixture(t, fs, 12, func(i int) bool { return i%4 == 0 })
	active := db.BlobFiles()[0]
	dry := mustCompact(t, db, CompactOptions{DryRun: true})
	if len(dry.Rewritten) != 1 || dry.Rewritten[0] != active.Num || db.w.Cur == nil {
		t.Fatalf("dry run: %+v (active %v); want the active file named and left active", dry, db.w.Cur)
	}
	rep := mustCompact(t, db, CompactOptions{})
	if len(rep.Rewritten) != 1 || rep.Rewritten[0] != active.Num || rep.BytesReclaimed < active.DeadBytes {
		t.Fatalf("compact: %+v; want %06d rewritten, its %d dead bytes reclaimed", rep, active.Num, active.DeadBytes)
	}
	files := db.BlobFiles()
	if len(files) != 1 || files[0].Num == active.Num || !files[0].Sealed || files[0].DeadBytes != 0 {
		t.Fatalf("files after compact: %+v; want one sealed output with no dead bytes", files)
	}
	for id, p := range kept {
		checkPacket(t, db, p, id)
	}
	p := randPacket(testSpec(format.DTypeBF16, 2, 2, 8), "ns", 100, 99)
	id, err := db.Put(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	kept[id] = p
	if files := db.BlobFiles(); len(files) != 2 || files[1].Sealed {
		t.Fatalf("after a Put: %+v; want a new active file", files)
	}
	wantClean(t, db, "after rolling")
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = openMem(t, fs, &Options{FS: fs, Logger: quiet, BlobFileSize: 1 << 30})
	defer db.Close()
	for id, p := range kept {
		checkPacket(t, db, p, id)
	}
	wantClean(t, db, "reopened")
}

// Compact leaves an active file whose live ratio is not below the ratio,
// and GC rolls and removes one with nothing live in it (rm of every
// packet, then gc, empties the disk).
func TestGCRollsDeadActiveFile(t *testing.T) {
	fs := vfs.NewMem()
	db, _ := rollFixture(t, fs, 6, func(i int) bool { return i == 0 })
	if rep := mustCompact(t, db, CompactOptions{LiveRatio: 0.1}); len(rep.Rewritten) != 0 || db.w.Cur == nil {
		t.Fatalf("compact at ratio 0.1 of a file 1/6 live: %+v; want nothing rolled or rewritten", rep)
	}
	defer db.Close()
	spec := testSpec(format.DTypeBF16, 2, 2, 8)
	ids, _, err := db.List("ns", spec.Fingerprint(), nil, 10)
	if err != nil || len(ids) != 1 {
		t.Fatalf("list: %v, %v", ids, err)
	}
	if err := db.Delete(context.Background(), "ns", spec.Fingerprint(), ids[0]); err != nil {
		t.Fatal(err)
	}
	num := db.BlobFiles()[0].Num
	dry, err := db.GC(context.Background(), GCOptions{DryRun: true})
	if err != nil || len(dry.RecordsRemoved) != 1 || db.w.Cur == nil {
		t.Fatalf("gc dry run: %+v, %v; want the active file's record named, the file left active", dry, err)
	}
	rep, err := db.GC(context.Background(), GCOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.FilesRemoved) != 1 || rep.FilesRemoved[0] != num || rep.BytesReclaimed != dry.BytesReclaimed {
		t.Fatalf("gc: %+v (dry run %+v); want %06d removed", rep, dry, num)
	}
	if files := db.BlobFiles(); len(files) != 0 {
		t.Fatalf("files after gc: %+v", files)
	}
	if _, err := db.Put(context.Background(), randPacket(spec, "ns", 100, 77)); err != nil {
		t.Fatal(err)
	}
	wantClean(t, db, "after gc")
}
