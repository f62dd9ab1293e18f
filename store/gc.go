package store

import (
	"context"

	"github.com/kvstore/kvstore/store/internal/maint"
)

// GCReport says what GC reclaimed.
type GCReport struct {
	// FilesRemoved are blob files removed: unreferenced ones, and fully
	// dead ones whose records went (those are removed once no view maps
	// them).
	FilesRemoved []uint32
	// RecordsRemoved are blob file records deleted from the catalog.
	RecordsRemoved []uint32
	// BytesReclaimed is the bytes freed: of the files removed, and what
	// the compaction of garbage tails reclaimed.
	BytesReclaimed uint64
	// Compaction is the rewrite of files with garbage tails (nil if none).
	Compaction *CompactReport
}

// fromGCReport is maint's report as the store's; nil stays nil.
func fromGCReport(r *maint.GCReport) *GCReport {
	if r == nil {
		return nil
	}
	return &GCReport{FilesRemoved: r.FilesRemoved, RecordsRemoved: r.RecordsRemoved, BytesReclaimed: r.BytesReclaimed,
		Compaction: fromCompactReport(r.Compaction)}
}

// GC reclaims what Check lists as garbage and what is wholly dead:
//
//   - blob files in blobs/ with no catalog record (left by a write or a
//     compaction that crashed before its batch, or retired by one that
//     crashed before removing them): removed;
//   - records of blob files that are gone and held no live extent:
//     deleted;
//   - files other than the active one with no live extent: their records
//     deleted in one synced batch, then the files removed once no view
//     maps them;
//   - files other than the active one with bytes past their catalogued
//     size (a crashed append): rewritten by a compaction of those files.
//
// The active file's tail is left: the next write overwrites it. While the
// store holds new data for lack of disk space (space.go), tails are not
// rewritten (a rewrite needs room), and GC ends by re-creating the space
// reserve once the room it freed allows. GC holds
// the writer lock; readers keep working. It is crash-safe (records go
// before files) and idempotent. o.DryRun reports what GC would remove and
// rewrite (the tails' compaction as a dry run) and changes nothing.
func (db *DB) GC(ctx context.Context, o GCOptions) (*GCReport, error) {
	var rep *maint.GCReport
	err := db.write("gc", nil, func() (err error) {
		rep, err = db.gcLocked(ctx, toGCOptions(&o))
		return err
	})
	return fromGCReport(rep), err
}

// GCOptions tune GC. The zero value reclaims everything GC can.
type GCOptions struct {
	// DryRun reports what would be reclaimed and writes nothing.
	DryRun bool
	// Progress, if not nil, is passed to the compaction of tails (see
	// CompactOptions.Progress).
	Progress func(done, total int64)
}

// toGCOptions is o as maint's (the same fields).
func toGCOptions(o *GCOptions) *maint.GCOptions { return (*maint.GCOptions)(o) }

// gcLocked is GC (maint.Writer.GC); the writer lock is held.
func (db *DB) gcLocked(ctx context.Context, o *maint.GCOptions) (*maint.GCReport, error) {
	w := db.maintWriter()
	rep, err := w.GC(ctx, o, db.w.Hold != nil)
	db.w.Next = w.Next
	if rep != nil && rep.Compaction != nil && !o.DryRun {
		db.countCompaction(rep.Compaction)
	}
	if err != nil || o.DryRun {
		return rep, err
	}
	db.restoreReserve()
	db.st.gcRuns.Add(1)
	db.st.reclaimedBytes.Add(rep.BytesReclaimed - compactReclaimed(rep.Compaction))
	if len(rep.FilesRemoved)+len(rep.RecordsRemoved) > 0 || rep.Compaction != nil {
		db.log.Info("store: gc", "dir", db.dir, "files_removed", rep.FilesRemoved, "records_removed", rep.RecordsRemoved,
			"reclaimed_bytes", rep.BytesReclaimed)
	}
	return rep, nil
}

func compactReclaimed(r *maint.CompactReport) uint64 {
	if r == nil {
		return 0
	}
	return r.BytesReclaimed // already counted by the compaction
}

// blobFilesOnDisk returns the size of every NNNNNN.blob in blobs/
// (maint.DiskFiles).
func (db *DB) blobFilesOnDisk() (map[uint32]uint64, error) { return maint.DiskFiles(db.fs, db.w.Dir) }
