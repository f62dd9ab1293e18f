package store

import (
	"errors"
	"fmt"
	"github.com/cockroachdb/pebble/v2/vfs"
	iofs "io/fs"
	"time"

	"github.com/kvstore/kvstore/store/internal/bloblog"
	"github.com/kvstore/kvstore/store/internal/catalog"
	"github.com/kvstore/kvstore/store/internal/maint"
	"github.com/kvstore/kvstore/store/internal/recovery"
)

// RecoverReport is what Recover did.
type RecoverReport struct {
	ReconcileReport
	// MovedAside is where the old catalog directory now is ("" when there
	// was none); Recover never deletes it.
	MovedAside string
	NextBlob   uint32 // the rebuilt catalog's next blob file number
	// GoneFiles are the blob file numbers below the highest on disk whose
	// files are gone (removed by compaction or GC). Tombstones they held
	// went with them, so a packet deleted before then whose extent survives
	// in another file is back in the rebuilt catalog: the rebuild cannot
	// tell. Empty when no file was ever removed.
	GoneFiles []uint32
}

// Recover rebuilds the catalog of the closed store in dir from its blob
// files: the old catalog directory is renamed DIR/catalog.lost-<UTC time>
// (never deleted), a new one is created, and every whole extent of every
// blob file is read: put records (packets written by format 1.1 or later)
// are re-inserted and tombstones applied, latest sequence first. What it
// cannot rebuild is counted in the report (NoRecord): span memories,
// artifacts and packets written before format 1.1, as well as pins and
// access statistics. Evicted packets stay evicted (evictions write
// tombstones, except those of versions before the seventh session). A
// packet deleted before a compaction or GC removed
// the file holding its tombstone, while an older file still holds its
// extent, comes back (docs/format.md, "Rebuilding the catalog").
//
// It takes DIR/LOCK (ErrLocked while the store is open); a directory
// without a FORMAT file is ErrNotFound. Open the store afterwards as
// usual; run Check to see the rebuilt accounting.
func Recover(dir string, opts *Options) (*RecoverReport, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	o.ReadOnly, o.MustExist = false, true
	if err := o.Validate(); err != nil {
		return nil, err
	}
	o.EnsureDefaults()
	fs := o.FS
	found, err := catalog.ReadFormat(fs, dir)
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, fmt.Errorf("%w: no store at %s (no FORMAT file)", ErrNotFound, dir)
	}
	lock, _, err := lockDir(o.FS, fs, dir, false)
	if err != nil {
		return nil, err
	}
	defer lock.Close()
	rep := &RecoverReport{}
	catDir := fs.PathJoin(dir, catalogDirName)
	if _, err := fs.Stat(catDir); err == nil {
		rep.MovedAside = fs.PathJoin(dir, catalogDirName+".lost-"+time.Now().UTC().Format("20060102T150405.000000000"))
		if err := fs.Rename(catDir, rep.MovedAside); err != nil {
			return nil, fmt.Errorf("store: recover: move %s aside: %w", catDir, err)
		}
		if err := bloblog.SyncDir(fs, dir); err != nil {
			return nil, err
		}
	} else if !errors.Is(err, iofs.ErrNotExist) {
		return nil, fmt.Errorf("store: recover: stat %s: %w", catDir, err)
	}
	cat, err := openCatalog(catDir, &o)
	if err != nil {
		return nil, err
	}
	err = rebuild(fs, fs.PathJoin(dir, blobsDirName), cat, rep)
	if cerr := cat.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("store: recover: close the new catalog: %w", cerr)
	}
	if err != nil {
		return nil, err
	}
	return rep, nil
}

// rebuild fills the new, empty catalog cat from every blob file in blobs
// and says what it did in rep.
func rebuild(fs vfs.FS, blobs string, cat *catalog.Catalog, rep *RecoverReport) error {
	disk, err := maint.DiskFiles(fs, blobs)
	if err != nil {
		return err
	}
	p, err := recovery.Reconcile(&recovery.Store{Catalog: cat, FS: fs, Dir: blobs, Disk: disk, Full: true, DropPacket: deleteOpsKeys})
	if err != nil {
		return err
	}
	if err := p.Commit(); err != nil {
		return err
	}
	rep.ReconcileReport, rep.NextBlob, rep.GoneFiles = fromReconcileReport(p.Report), p.NextBlob(), recovery.GoneFiles(disk)
	return nil
}
