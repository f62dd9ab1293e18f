package store

import (
	"github.com/kvstore/kvstore/store/internal/maint"
	"github.com/kvstore/kvstore/store/internal/recovery"
)

// ReconcileReport says what Open (or Recover) found in the blob log that
// the catalog did not hold, and what it did about it (docs/format.md,
// "Rebuilding the catalog").
type ReconcileReport struct {
	// Scanned is the whole extents read past the catalogued ends of the
	// blob files.
	Scanned int
	// Inserted is the packets re-inserted from their put records.
	Inserted int
	// Replaced is the catalogued packets a newer put record replaced.
	Replaced int
	// Deleted is the catalogued (or re-inserted) packets a tombstone
	// deleted.
	Deleted int
	// Stale is the records older than the catalog's sequence (copies,
	// already applied).
	Stale int
	// Repointed is the catalogued packets whose blob file is gone,
	// repointed to a copy compaction made.
	Repointed int
	// NoRecord is the extents without a record (span memories, artifacts,
	// packets of format 1.0): they are not rebuilt.
	NoRecord int
	// NewFiles is the blob files the catalog did not list, now catalogued.
	NewFiles int
	// TornBytes is the bytes past the last whole extent of the blob files
	// (a write that crashed).
	TornBytes uint64
	// Problems are records that contradict the catalog or each other; each
	// was left out, and is named here.
	Problems []string
}

// Changed reports whether the catalog needed a change.
func (r *ReconcileReport) Changed() bool { return (*recovery.Report)(r).Changed() }

// fromReconcileReport is recovery's report as the store's (the same
// fields).
func fromReconcileReport(r recovery.Report) ReconcileReport { return ReconcileReport(r) }

// reconcile brings the catalog up to date with the blob log before the
// store is loaded: put records and tombstones synced past the catalog's
// recorded ends (a batch lost with a damaged WAL, never committed because
// the process stopped, or committed but not yet synced when it did: Put and
// Delete do not wait for the catalog's WAL, commitLogged) are applied. A
// read-only open that finds any cannot write the catalog, and must not serve
// it without them: it reopens the catalog read-write over a file system
// that keeps Pebble's writes in memory (catalog.Options.InMemory) and
// applies them there, so it serves the acknowledged state and the disk is
// not written; the next read-write open applies them on disk.
func (db *DB) reconcile() error {
	disk, err := maint.DiskFiles(db.fs, db.w.Dir)
	if err != nil {
		return err
	}
	plan := func() (*recovery.Plan, error) {
		return recovery.Reconcile(&recovery.Store{Catalog: db.cat, FS: db.fs, Dir: db.w.Dir, Disk: disk, DropPacket: deleteOpsKeys})
	}
	p, err := plan()
	if err != nil {
		return err
	}
	if p.Report.Changed() {
		if db.opts.ReadOnly {
			// The catalog cannot take the batch on disk: reopen it with
			// Pebble's writes kept in memory, and reconcile there.
			if err := db.cat.Close(); err != nil {
				db.cat = nil
				return err
			}
			if db.cat, err = openCatalogInMemory(db.fs.PathJoin(db.dir, catalogDirName), db.catalogOptions()); err != nil {
				return err
			}
			db.inMemoryCatalog = true
			if p, err = plan(); err != nil {
				return err
			}
		}
		if err := p.Commit(); err != nil {
			return err
		}
	}
	db.w.Seq = p.NextSeq()
	db.reconciled = fromReconcileReport(p.Report)
	db.logReconcile(&db.reconciled)
	return nil
}

// logReconcile reports what reconcile found: changes at Warn (the catalog
// had lost them), problems at Error.
func (db *DB) logReconcile(r *ReconcileReport) {
	if r.Changed() || r.NoRecord > 0 {
		db.log.Warn("store: recovery: the catalog lacked records the blob log holds",
			"dir", db.dir, "in_memory_only", db.inMemoryCatalog, "inserted", r.Inserted, "replaced", r.Replaced, "deleted", r.Deleted, "repointed", r.Repointed,
			"new_files", r.NewFiles, "stale", r.Stale, "without_record", r.NoRecord, "torn_bytes", r.TornBytes)
	}
	for _, p := range r.Problems {
		db.log.Error("store: recovery: record left out", "dir", db.dir, "problem", p)
	}
}
