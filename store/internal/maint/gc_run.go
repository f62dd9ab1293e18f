package maint

import (
	"context"
	"errors"
	"fmt"
	iofs "io/fs"
	"slices"

	"github.com/kvstore/kvstore/store/internal/catalog"
)

// GCOptions tune GC. The zero value reclaims everything GC can.
type GCOptions struct {
	// DryRun reports what would be reclaimed and writes nothing.
	DryRun bool
	// Progress, if not nil, is passed to the compaction of tails (see
	// CompactOptions.Progress).
	Progress func(done, total int64)
}

// GC carries out PlanGC: it removes the orphans, drops the dead records in
// one synced batch and retires their files, and compacts the files with
// tails and the files in rewrite (the store's rolled active file), those
// the disk has room for (Fits). o.DryRun reports what it would do and
// changes nothing. On an error in the compaction the report says what was
// done.
func (w *Writer) GC(ctx context.Context, o *GCOptions, rewrite []uint32) (*GCReport, error) {
	disk, err := DiskFiles(w.FS, w.Dir)
	if err != nil {
		return nil, err
	}
	active := uint32(0)
	if w.HasActive {
		active = w.Active
	}
	plan := PlanGC(w.Registry.Records(), disk, active, w.Files.Retiring)
	if o.DryRun {
		return w.gcDryRun(ctx, plan, disk, rewrite)
	}
	rep := &GCReport{}
	if err := w.removeUnreferenced(rep, plan.Orphans, disk); err != nil {
		return nil, err
	}
	if err := w.dropDeadRecords(rep, plan.Dead, disk); err != nil {
		return nil, err
	}
	if files := rewrites(plan, rewrite); len(files) > 0 {
		if rep.Compaction, err = w.Compact(ctx, &CompactOptions{Files: files, Progress: o.Progress}); err != nil {
			return rep, err
		}
		rep.BytesReclaimed += rep.Compaction.BytesReclaimed
	}
	return rep, nil
}

// rewrites are the files GC compacts: plan's tails and rewrite, less any
// whose record plan drops.
func rewrites(plan *GCPlan, rewrite []uint32) []uint32 {
	dead := map[uint32]bool{}
	for _, r := range plan.Dead {
		dead[r.Num] = true
	}
	files := plan.Tails
	for _, n := range rewrite {
		if !dead[n] && !slices.Contains(files, n) {
			files = append(files, n)
		}
	}
	return files
}

// gcDryRun is the report plan would give, nothing changed.
func (w *Writer) gcDryRun(ctx context.Context, plan *GCPlan, disk map[uint32]uint64, rewrite []uint32) (*GCReport, error) {
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
	if files := rewrites(plan, rewrite); len(files) > 0 {
		c, err := w.Compact(ctx, &CompactOptions{Files: files, DryRun: true})
		if err != nil {
			return nil, err
		}
		rep.Compaction = c
		rep.BytesReclaimed += c.BytesReclaimed
	}
	return rep, nil
}

// removeUnreferenced removes the orphans GC planned: blob files that
// have no record and that no view maps.
func (w *Writer) removeUnreferenced(rep *GCReport, orphans []uint32, disk map[uint32]uint64) error {
	for _, num := range orphans {
		err := w.FS.Remove(w.Path(num))
		if err != nil && !errors.Is(err, iofs.ErrNotExist) {
			return fmt.Errorf("store: remove unreferenced blob file %s: %w", w.Path(num), err)
		}
		rep.FilesRemoved = append(rep.FilesRemoved, num)
		rep.BytesReclaimed += disk[num]
		delete(disk, num)
	}
	return nil
}

// dropDeadRecords deletes, in one synced batch, the records GC planned to
// drop (files with no live extent), then retires those files.
func (w *Writer) dropDeadRecords(rep *GCReport, dead []catalog.BlobFile, disk map[uint32]uint64) error {
	if len(dead) == 0 {
		return nil
	}
	b := w.Catalog.DB.NewBatch()
	defer b.Close()
	for _, r := range dead {
		_ = b.Delete(catalog.BlobFileKey(r.Num), nil)
	}
	if err := w.Commit(b); err != nil {
		return fmt.Errorf("gc: %w", err)
	}
	for _, r := range dead {
		rep.RecordsRemoved = append(rep.RecordsRemoved, r.Num)
		if size, onDisk := disk[r.Num]; onDisk {
			rep.FilesRemoved = append(rep.FilesRemoved, r.Num)
			rep.BytesReclaimed += size
		}
		if w.HasActive && r.Num == w.Active {
			w.DropActive() // its file is gone: the next write starts a new one
			w.Active, w.HasActive = 0, false
		}
		if _, onDisk := disk[r.Num]; onDisk {
			w.Registry.Retire(r.Num)
		} else {
			w.Registry.Drop(r.Num)
		}
	}
	return nil
}
