package store

import (
	"errors"
	"fmt"
	iofs "io/fs"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store/internal/bloblog"
	"github.com/kvstore/kvstore/store/internal/catalog"
	"github.com/kvstore/kvstore/store/internal/maint"
	"github.com/kvstore/kvstore/store/internal/recovery"
)

// RecoverReport is what Recover did.
type RecoverReport struct {
	ReconcileReport
	// Format is what Recover's first step, RecoverFormat, did.
	Format FormatReport
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

// FormatReport is what RecoverFormat did to a store's FORMAT files.
type FormatReport struct {
	// Version is the format version both copies say now.
	Version format.Version
	// Found says what was wrong with each copy: missing, unreadable,
	// damaged, or older than the other. Empty when nothing was (a store
	// at a version before 1.2 has no FORMAT.copy, and none is asked of it).
	Found []string
	// Rewritten: both copies were written.
	Rewritten bool
	// FromBlobs: neither copy was good, so Version is the newest one named
	// by the BlobHeaders intact blob file headers read, or this build's
	// (format.Current) when none could be read.
	FromBlobs   bool
	BlobHeaders int
}

// Recover rebuilds the catalog of the closed store in dir from its blob
// files. First it repairs the FORMAT files as RecoverFormat does (the
// report's Format). Then the old catalog directory is renamed
// DIR/catalog.lost-<UTC time> (never deleted), a new one is created, and
// every whole extent of every blob file is read: put records (packets
// written at format 1.1 or later) are re-inserted and tombstones applied,
// latest sequence first. What it cannot rebuild is counted in the report
// (NoRecord): span memories, artifacts and packets written at format 1.0,
// as well as pins and access statistics. Packets evicted for
// Options.MaxBytes stay evicted if the eviction wrote tombstones, which
// evictions do since format 1.2: a packet evicted by a writer of 1.1 or
// 1.0 comes back. A packet deleted before a compaction or GC removed the
// file holding its tombstone, while an older file still holds its extent,
// comes back too (docs/format.md, "Rebuilding the catalog").
//
// It takes DIR/LOCK (ErrLocked while the store is open). A directory
// without a FORMAT file, blob files or a catalog is ErrNotFound. Open the
// store afterwards as usual; run Check to see the rebuilt accounting.
func Recover(dir string, opts *Options) (*RecoverReport, error) {
	o, err := recoverOptions(opts)
	if err != nil {
		return nil, err
	}
	fs := o.FS
	if err := requireStoreEvidence(fs, dir); err != nil {
		return nil, err
	}
	lock, _, err := lockDir(o.FS, fs, dir, false, o.LockWait)
	if err != nil {
		return nil, err
	}
	defer lock.Close()
	rep := &RecoverReport{}
	f, err := recoverFormat(fs, dir)
	if err != nil {
		return nil, err
	}
	rep.Format = *f
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

// RecoverFormat rewrites the FORMAT files (FORMAT and FORMAT.copy) of the
// closed store in dir, for a store Open refuses because neither copy is
// good; a read-write Open repairs one bad copy by itself. It writes the
// version of the good copy when there is one, else the newest version an
// intact blob file header names (a header naming a newer major is
// ErrVersion), else this build's, format.Current. It changes nothing
// else: the catalog and the blob files are kept as they are, so that
// span memories, artifacts and pins, which Recover cannot rebuild,
// survive. It takes DIR/LOCK (ErrLocked while the store is open). A
// directory without a FORMAT file, blob files or a catalog is
// ErrNotFound.
//
// A version read from blob file headers is the newest format that created
// a file, which can be older than the version a read-write Open last
// wrote (it writes up the FORMAT files, not the headers of the files it
// appends to); the next read-write Open writes it up again. A future major
// version must therefore start a new blob file when it moves a store to
// it.
func RecoverFormat(dir string, opts *Options) (*FormatReport, error) {
	o, err := recoverOptions(opts)
	if err != nil {
		return nil, err
	}
	if err := requireStoreEvidence(o.FS, dir); err != nil {
		return nil, err
	}
	lock, _, err := lockDir(o.FS, o.FS, dir, false, o.LockWait)
	if err != nil {
		return nil, err
	}
	defer lock.Close()
	return recoverFormat(o.FS, dir)
}

// recoverOptions are Recover's and RecoverFormat's options: opts'
// (nil: the defaults), read-write, on an existing store.
func recoverOptions(opts *Options) (Options, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	o.ReadOnly, o.MustExist = false, true
	if err := o.Validate(); err != nil {
		return o, err
	}
	o.EnsureDefaults()
	return o, nil
}

// requireStoreEvidence refuses (ErrNotFound), before anything is locked
// or written, a directory that holds none of what a store has: a FORMAT
// file or its copy, a blob file, a catalog directory.
func requireStoreEvidence(fs vfs.FS, dir string) error {
	for _, name := range []string{formatFileName, formatCopyName, catalogDirName} {
		if _, err := fs.Stat(fs.PathJoin(dir, name)); err == nil {
			return nil
		} else if !errors.Is(err, iofs.ErrNotExist) {
			return fmt.Errorf("store: stat %s: %w", fs.PathJoin(dir, name), err)
		}
	}
	if errors.Is(catalog.LostFormat(fs, dir, blobsDirName), ErrCorruption) {
		return nil
	}
	return fmt.Errorf("%w: no store at %s (no FORMAT file, blob file or catalog)", ErrNotFound, dir)
}

// recoverFormat is RecoverFormat under the lock.
func recoverFormat(fs vfs.FS, dir string) (*FormatReport, error) {
	f, err := catalog.ReadFormat(fs, dir)
	if err != nil && (errors.Is(err, ErrVersion) || !f.Exists) {
		return nil, err
	}
	rep := &FormatReport{Version: f.Version, Found: f.Bad}
	if !f.Found {
		v, n, err := catalog.BlobVersion(fs, fs.PathJoin(dir, blobsDirName))
		if err != nil {
			return nil, err
		}
		if n == 0 {
			v = format.Current
		}
		rep.Version, rep.FromBlobs, rep.BlobHeaders = v, true, n
	}
	if !f.Found || len(f.Bad) > 0 {
		if err := catalog.WriteFormat(fs, dir, rep.Version); err != nil {
			return nil, err
		}
		rep.Rewritten = true
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
