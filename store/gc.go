package store

import (
	"context"
	"errors"
	"fmt"
	iofs "io/fs"

	"github.com/kvstore/kvstore/store/internal/catalog"
	"github.com/kvstore/kvstore/store/internal/maint"
)

// GCReport says what GC reclaimed.
type GCReport = maint.GCReport

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
	var rep *GCReport
	err := db.write("gc", nil, func() (err error) {
		rep, err = db.gcLocked(ctx, &o)
		return err
	})
	return rep, err
}

// GCOptions tune GC. The zero value reclaims everything GC can.
type GCOptions struct {
	// DryRun reports what would be reclaimed and writes nothing.
	DryRun bool
	// Progress, if not nil, is passed to the compaction of tails (see
	// CompactOptions.Progress).
	Progress func(done, total int64)
}

// gcLocked is GC; the writer lock is held.
func (db *DB) gcLocked(ctx context.Context, o *GCOptions) (*GCReport, error) {
	rep := &GCReport{}
	disk, err := db.blobFilesOnDisk()
	if err != nil {
		return nil, err
	}
	active := uint32(0)
	if db.w.Cur != nil {
		active = db.w.Cur.Num
	}
	plan := maint.PlanGC(db.BlobFiles(), disk, active, db.isRetiring)
	if o.DryRun {
		return db.gcDryRun(ctx, plan, disk)
	}
	if err := db.removeUnreferenced(rep, plan.Orphans, disk); err != nil {
		return nil, err
	}
	if err := db.dropDeadRecords(rep, plan.Dead, active, disk); err != nil {
		return nil, err
	}
	if tails := plan.Tails; len(tails) > 0 && db.w.Hold == nil {
		if rep.Compaction, err = db.compactLocked(ctx, &CompactOptions{Files: tails, Progress: o.Progress}); err != nil {
			return rep, err
		}
		rep.BytesReclaimed += rep.Compaction.BytesReclaimed
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

// gcDryRun is the report plan would give, nothing changed.
func (db *DB) gcDryRun(ctx context.Context, plan *maint.GCPlan, disk map[uint32]uint64) (*GCReport, error) {
	rep := &GCReport{}
	for _, num := range plan.Orphans {
		rep.FilesRemoved = append(rep.FilesRemoved, num)
		rep.BytesReclaimed += disk[num]
	}
	for _, r := range plan.Dead {
		rep.RecordsRemoved = append(rep.RecordsRemoved, r.Num)
		if size, onDisk := disk[r.Num]; onDisk {
			rep.FilesRemoved = append(rep.FilesRemoved, r.Num)
			rep.BytesReclaimed += size
		}
	}
	if len(plan.Tails) > 0 && db.w.Hold == nil {
		c, err := db.compactLocked(ctx, &CompactOptions{Files: plan.Tails, DryRun: true})
		if err != nil {
			return nil, err
		}
		rep.Compaction = c
		rep.BytesReclaimed += c.BytesReclaimed
	}
	return rep, nil
}

func compactReclaimed(r *CompactReport) uint64 {
	if r == nil {
		return 0
	}
	return r.BytesReclaimed // already counted by the compaction
}

// blobFilesOnDisk returns the size of every NNNNNN.blob in blobs/
// (maint.DiskFiles).
func (db *DB) blobFilesOnDisk() (map[uint32]uint64, error) { return maint.DiskFiles(db.fs, db.w.Dir) }

// removeUnreferenced removes the orphans GC planned: blob files that
// have no record and that no view maps.
func (db *DB) removeUnreferenced(rep *GCReport, orphans []uint32, disk map[uint32]uint64) error {
	for _, num := range orphans {
		err := db.fs.Remove(blobPath(db, num))
		if err != nil && !errors.Is(err, iofs.ErrNotExist) {
			return fmt.Errorf("store: remove unreferenced blob file %s: %w", blobPath(db, num), err)
		}
		rep.FilesRemoved = append(rep.FilesRemoved, num)
		rep.BytesReclaimed += disk[num]
		delete(disk, num)
	}
	return nil
}

// dropDeadRecords deletes, in one synced batch, the records GC planned to
// drop (files with no live extent), then retires those files.
func (db *DB) dropDeadRecords(rep *GCReport, dead []BlobFileInfo, active uint32, disk map[uint32]uint64) error {
	if len(dead) == 0 {
		return nil
	}
	b := db.cat.DB.NewBatch()
	defer b.Close()
	for _, r := range dead {
		_ = b.Delete(catalog.BlobFileKey(r.Num), nil)
	}
	if err := db.commit(b); err != nil {
		return fmt.Errorf("gc: %w", err)
	}
	for _, r := range dead {
		rep.RecordsRemoved = append(rep.RecordsRemoved, r.Num)
		if size, onDisk := disk[r.Num]; onDisk {
			rep.FilesRemoved = append(rep.FilesRemoved, r.Num)
			rep.BytesReclaimed += size
		}
		if r.Num == active {
			_ = db.w.Close()
			db.w.Cur = nil // its file is gone: the next write starts a new one
		}
		if _, onDisk := disk[r.Num]; onDisk {
			db.retire(r.Num)
		} else {
			db.dropFile(r.Num)
		}
	}
	return nil
}
