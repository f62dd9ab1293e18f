package store

import (
	"errors"
	"fmt"

	"github.com/kvstore/kvstore/store/internal/bloblog"
	"github.com/kvstore/kvstore/store/internal/catalog"
	"github.com/kvstore/kvstore/store/internal/gate"
	"github.com/kvstore/kvstore/store/internal/recovery"
)

// File and directory names inside a store's directory.
const (
	formatFileName = catalog.FormatFileName
	lockFileName   = "LOCK"
	catalogDirName = "catalog"
	blobsDirName   = "blobs"
	formatTmpName  = catalog.FormatTmpName
	formatCopyName = catalog.FormatCopyName
)

// Open opens the store in dir, creating it if absent (unless opts.ReadOnly).
// It holds DIR/LOCK until Close: a second Open of the same store, from this
// process or another, fails with ErrLocked, except that read-only opens of
// a store on the OS's file system share it (store/internal/lock). A store
// whose FORMAT names a newer format major version is refused with an
// error wrapping ErrVersion, and so is, at its first read, a blob file
// whose intact header claims one; a newer minor version is served and
// written. FORMAT is kept twice (FORMAT and FORMAT.copy, formatfile.go):
// Open uses a good copy, and a read-write Open rewrites a bad one and
// moves a store at an older format version to format.Current before it
// writes anything else. A directory whose FORMAT copies are both damaged,
// or that has blob files or catalog records but neither copy, is refused
// with ErrCorruption naming the remedy (RecoverFormat): a new store is
// never started over it. Before serving, Open reconciles the
// catalog with the blob log: put records and tombstones synced past the
// catalogued ends of the blob files (a batch a crash or a damaged WAL lost)
// are applied, and reported in Stats().Reconciled; a read-only open that
// finds any applies them to the catalog in memory only, writing nothing
// (Stats().ReconciledInMemory, reconcile.go). A missing or
// unreadable catalog is refused; Recover rebuilds it from the blob files.
// A nil opts means the defaults.
func Open(dir string, opts *Options) (*DB, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if err := o.Validate(); err != nil {
		return nil, err
	}
	o.EnsureDefaults()
	db := &DB{dir: dir, opts: o, fs: o.FS, log: o.Logger, gate: gate.New(),
		files: make(map[uint32]*bloblog.File), recs: make(map[uint32]blobRecord)}
	db.w = bloblog.Writer{FS: o.FS, Dir: o.FS.PathJoin(dir, blobsDirName), Limit: uint64(o.BlobFileSize), Next: 1}
	if err := db.open(); err != nil {
		err = noSpace(err)
		db.closeFiles()
		if db.cat != nil {
			_ = db.cat.Close()
		}
		if db.lock != nil {
			_ = db.lock.Close()
		}
		return nil, err
	}
	if !o.ReadOnly {
		db.startCatalogSync()
		db.restoreReserve()
	}
	db.logOpen()
	return db, nil
}

// open runs Open's steps; Open undoes them on error.
func (db *DB) open() error {
	if err := catalog.RequireStore(db.fs, db.dir, blobsDirName, db.opts.ReadOnly || db.opts.MustExist, ErrNotFound); err != nil {
		if errors.Is(err, ErrCorruption) {
			err = fmt.Errorf("%w; %s", err, recoverFormatHint)
		}
		return err
	}
	if err := catalog.PrepareDir(db.fs, db.dir); err != nil {
		return err
	}
	if err := db.lockStore(); err != nil {
		return err
	}
	f, create, err := db.checkFormat()
	if err != nil {
		return err
	}
	if !db.opts.ReadOnly {
		if err := db.releaseReserve(); err != nil {
			return err
		}
		if !create {
			if err := db.upgradeFormat(f); err != nil {
				return err
			}
		}
	} else {
		db.logFormat(f)
	}
	if create {
		if err := db.fs.MkdirAll(db.w.Dir, 0o755); err != nil {
			return fmt.Errorf("store: create %s: %w", db.w.Dir, err)
		}
	}
	if !create {
		if err := catalog.RequireExisting(db.fs, db.fs.PathJoin(db.dir, catalogDirName)); err != nil {
			return err
		}
	}
	if db.cat, err = openCatalog(db.fs.PathJoin(db.dir, catalogDirName), db.catalogOptions()); err != nil {
		return err
	}
	if create {
		if err := db.checkEmptyCatalog(); err != nil {
			return err
		}
		if err := db.writeFormat(); err != nil {
			return err
		}
	} else if err := db.reconcile(); err != nil {
		return err
	}
	return db.load()
}

// load registers the catalogued blob files (recovery.Files), takes the
// next file number and picks the active file: the highest numbered, unless
// sealed.
func (db *DB) load() error {
	recs, next, err := recovery.Files(db.cat)
	if err != nil {
		return err
	}
	for _, r := range recs {
		db.addFile(r)
	}
	db.preopenFiles(recs)
	// A catalog that fails the scan fails the lookups that need it, as
	// before: Open does not refuse it here.
	_ = db.cat.LoadModels(&db.models, preloadModels)
	db.w.Next = next
	if n := len(recs); n > 0 && !recs[n-1].Sealed && !db.opts.ReadOnly {
		last := recs[n-1]
		db.w.Cur = &bloblog.Active{Num: last.Num, Path: db.fs.PathJoin(db.w.Dir, bloblog.FileName(last.Num)), End: last.Size}
	}
	return db.loadSpanCount()
}

// preloadModels bounds the model specs Open reads into the DB's cache
// (catalog.LoadModels), so that a restore's first model lookup after Open
// is not a catalog read (7-10 µs just after Open, half a µs cached). The
// scan adds 20-40 µs to Open for a store of one model.
const preloadModels = 256

// preopenMax bounds the blob files Open opens and maps ahead of their first
// read (the newest ones), and so what that adds to Open: 40-70 µs a file
// on a loaded two-core VM (2.5-3.4 ms for 64 files), so at most about
// 15 ms; 256 files are 256 GiB at the default BlobFileSize. Older files
// are opened by their first read, as before.
const preopenMax = 256

// preopenFiles opens and maps the newest catalogued blob files, at most
// preopenMax (bloblog.File.Preopen), so that the first read of a packet
// after Open does not pay for its file's open, header check and mapping:
// in llamacpp's BenchmarkRestore at 256 tokens that was 77 µs of the
// 190 µs PrepareAssemble took just after Open (1 µs warm). The handles and
// mappings are those the files' first reads would have made, kept until
// Close as before; a file that fails to open is left for its first read
// to report.
func (db *DB) preopenFiles(recs []blobRecord) {
	for _, r := range recs[max(0, len(recs)-preopenMax):] {
		if f := db.file(r.Num); f != nil {
			f.Preopen()
			f.Release()
		}
	}
}
