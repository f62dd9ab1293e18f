package store

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/kvstore/kvstore/format"
)

// blobBytesOnDisk is the size of every blob file in db's blobs/.
func blobBytesOnDisk(t *testing.T, db *DB) uint64 {
	t.Helper()
	disk, err := db.blobFilesOnDisk()
	if err != nil {
		t.Fatal(err)
	}
	var n uint64
	for _, size := range disk {
		n += size
	}
	return n
}

// TestCompactBoundedSpace: Compact commits group by group, so the blob
// bytes on disk never exceed what was there by more than one blob file's
// worth plus output headers, although it copies several files' worth.
func TestCompactBoundedSpace(t *testing.T) {
	fs := vfs.NewMem()
	db := openMem(t, fs, opsOptions(fs))
	defer db.Close()
	x := newOpsFixture(t, db, fs, 30)
	start := blobBytesOnDisk(t, db)
	var peak uint64
	rep := mustCompact(t, db, CompactOptions{LiveRatio: 1, Progress: func(done, total int64) {
		peak = max(peak, blobBytesOnDisk(t, db))
	}})
	size := uint64(db.opts.BlobFileSize)
	if rep.BytesCopied < 2*size {
		t.Fatalf("copied %d bytes: the fixture should need several files' worth", rep.BytesCopied)
	}
	bound := size + 2*format.BlobHeaderSize
	t.Logf("copied %d bytes; blob bytes on disk %d at start, peak %d (+%d, bound +%d)", rep.BytesCopied, start, peak, peak-start, bound)
	if peak > start+bound {
		t.Fatalf("peak %d bytes on disk, %d over the start: more than one blob file (%d) plus headers", peak, peak-start, size)
	}
	x.checkAll(t, db)
	wantClean(t, db, "compacted")
}

// TestCompactCancelLaterGroup cancels a compaction in its second group:
// the first group stays committed (and reported), the partial output of
// the second is removed, and Check finds nothing amiss.
func TestCompactCancelLaterGroup(t *testing.T) {
	fs := vfs.NewMem()
	db := openMem(t, fs, opsOptions(fs))
	defer db.Close()
	x := newOpsFixture(t, db, fs, 30)
	ctx, cancel := context.WithCancel(context.Background())
	size := int64(db.opts.BlobFileSize)
	rep, err := db.Compact(ctx, CompactOptions{LiveRatio: 1, Progress: func(done, total int64) {
		if done > size {
			cancel()
		}
	}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled compaction: %v", err)
	}
	if rep == nil || len(rep.Rewritten) == 0 {
		t.Fatalf("report of the groups before the cancel: %+v", rep)
	}
	cat := db.BlobFiles()
	disk, err := db.blobFilesOnDisk()
	if err != nil {
		t.Fatal(err)
	}
	for num := range disk {
		if !slices.ContainsFunc(cat, func(f BlobFileInfo) bool { return f.Num == num }) {
			t.Errorf("blob file %06d on disk but not catalogued: the cancelled group's output was left", num)
		}
	}
	if r := wantClean(t, db, "cancelled"); len(r.Garbage) != 0 {
		t.Fatalf("garbage after a cancelled compaction: %+v", r.Garbage)
	}
	x.checkAll(t, db)
}

// TestCompactDryRunAndSkipped: DryRun names the files a real run rewrites
// (the active file among them, which the real run rolls first) and
// changes nothing; unknown file numbers are reported skipped with the
// reason.
func TestCompactDryRunAndSkipped(t *testing.T) {
	fs := vfs.NewMem()
	db := openMem(t, fs, opsOptions(fs))
	defer db.Close()
	x := newOpsFixture(t, db, fs, 15)
	before := db.BlobFiles()
	dry := mustCompact(t, db, CompactOptions{LiveRatio: 1, DryRun: true})
	if !slices.Equal(blobNums(before), blobNums(db.BlobFiles())) || len(dry.Created) != 0 {
		t.Fatalf("dry run changed the files: %v -> %v, created %v", blobNums(before), blobNums(db.BlobFiles()), dry.Created)
	}
	active := db.w.Cur.Num
	real := mustCompact(t, db, CompactOptions{LiveRatio: 1})
	if !slices.Equal(dry.Rewritten, real.Rewritten) || dry.BytesCopied != real.BytesCopied || len(dry.Rewritten) == 0 {
		t.Fatalf("dry run %+v, real run %+v", dry, real)
	}
	if !slices.Contains(real.Rewritten, active) || db.w.Cur != nil || len(real.Skipped) != 0 {
		t.Fatalf("active file %06d (it has dead bytes): rewritten %v, skipped %+v, active now %v; want it rolled and rewritten",
			active, real.Rewritten, real.Skipped, db.w.Cur)
	}
	rep := mustCompact(t, db, CompactOptions{Files: []uint32{999}})
	if len(rep.Skipped) != 1 || rep.Skipped[0].Num != 999 || !strings.Contains(rep.Skipped[0].Reason, "no such blob file") {
		t.Fatalf("skipped %+v, want 999, no such blob file", rep.Skipped)
	}
	x.checkAll(t, db)
}

func blobNums(fs []BlobFileInfo) []uint32 {
	var ns []uint32
	for _, f := range fs {
		ns = append(ns, f.Num)
	}
	return ns
}
