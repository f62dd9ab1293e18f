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
//     size (a crashed append): rewritten by a compaction of those files;
//   - the active file, once less than Options.CompactLiveRatio of it is
//     live: it is rolled (sealed, the next write starts a new file; see
//     Compact), then removed if nothing in it is live, else rewritten.
//
// The active file's tail is left: the next write overwrites it. A file is
// rewritten only if the disk has room for its live bytes besides what the
// store keeps for its catalog (space.go); one that has not is skipped and
// listed in the report's Compaction. GC ends by re-creating the space
// reserve once the room it freed allows, which ends a hold on new data.
// GC holds the writer lock; readers keep working. It is crash-safe
// (records go before files) and idempotent. o.DryRun reports what GC
// would remove and rewrite (the compaction as a dry run) and changes
// nothing.
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

// gcLocked is GC (maint.Writer.GC), after rolling the active file if it
// is mostly dead; the writer lock is held.
func (db *DB) gcLocked(ctx context.Context, o *maint.GCOptions) (*maint.GCReport, error) {
	var rewrite []uint32
	rolled, err := db.rollActive(func(r blobRecord) bool { return mostlyDead(r, db.opts.CompactLiveRatio) }, o.DryRun)
	if err != nil {
		return nil, err
	}
	w := db.maintWriter()
	if rolled != 0 {
		w.Active, w.HasActive = 0, false // as it will be once rolled (a dry run)
		rewrite = []uint32{rolled}
	}
	rep, err := w.GC(ctx, o, rewrite)
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
