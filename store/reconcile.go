package store

import (
	"fmt"

	"github.com/kvstore/kvstore/store/internal/maint"
	"github.com/kvstore/kvstore/store/internal/recovery"
)

// ReconcileReport says what Open (or Recover) found in the blob log that
// the catalog did not hold, and what it did about it (docs/format.md,
// "Rebuilding the catalog").
type ReconcileReport = recovery.Report

// reconcile brings the catalog up to date with the blob log before the
// store is loaded: put records and tombstones synced past the catalog's
// recorded ends (a batch lost with a damaged WAL, or never committed
// because the process stopped) are applied. A read-only open that finds
// any is refused (ErrCorruption): it cannot write the catalog, and would
// serve it without them. Since Put and Delete stopped waiting for the
// catalog's WAL (commitLogged), that is the state of any store a crash
// stopped, not only of one whose WAL was damaged; a read-write Open, or
// kvstore gc --dry-run, applies the records.
func (db *DB) reconcile() error {
	disk, err := maint.DiskFiles(db.fs, db.w.Dir)
	if err != nil {
		return err
	}
	p, err := recovery.Reconcile(&recovery.Store{Catalog: db.cat, FS: db.fs, Dir: db.w.Dir, Disk: disk, DropPacket: deleteOpsKeys})
	if err != nil {
		return err
	}
	if rep := &p.Report; rep.Changed() {
		if db.opts.ReadOnly {
			return fmt.Errorf("%w: the blob log holds %d packet records (and %d deletes) newer than the catalog (a crash before its WAL was synced): open the store read-write once to apply them (a writer's Open does, as does kvstore gc --dry-run); kvstore recover is for a catalog that cannot be opened",
				ErrCorruption, rep.Inserted+rep.Replaced, rep.Deleted)
		}
		if err := p.Commit(); err != nil {
			return err
		}
	}
	db.w.Seq = p.NextSeq()
	db.reconciled = p.Report
	db.logReconcile(&p.Report)
	return nil
}

// logReconcile reports what reconcile found: changes at Warn (the catalog
// had lost them), problems at Error.
func (db *DB) logReconcile(r *ReconcileReport) {
	if r.Changed() || r.NoRecord > 0 {
		db.log.Warn("store: recovery: the catalog lacked records the blob log holds",
			"dir", db.dir, "inserted", r.Inserted, "replaced", r.Replaced, "deleted", r.Deleted, "repointed", r.Repointed,
			"new_files", r.NewFiles, "stale", r.Stale, "without_record", r.NoRecord, "torn_bytes", r.TornBytes)
	}
	for _, p := range r.Problems {
		db.log.Error("store: recovery: record left out", "dir", db.dir, "problem", p)
	}
}
