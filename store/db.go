package store

import (
	"errors"
	"io"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/kvstore/kvstore/store/internal/bloblog"
	"github.com/kvstore/kvstore/store/internal/catalog"
	"github.com/kvstore/kvstore/store/internal/gate"
)

// DB is an open store. It is safe for concurrent use: writers (Put,
// Delete) are serialised, readers run concurrently with them and with each
// other. After Close every method returns ErrClosed; Views taken before
// Close stay readable until released.
type DB struct {
	dir  string
	opts Options
	fs   vfs.FS
	log  *slog.Logger
	lock io.Closer
	// sharedLock: lock is a shared flock (a read-only open, store/internal/lock)
	sharedLock bool
	cat        *catalog.Catalog
	// inMemoryCatalog: a read-only open found the catalog behind the blob
	// log and serves it reconciled in memory (reconcile.go).
	inMemoryCatalog bool
	// catSync syncs the catalog's WAL behind unsynced commits
	// (commitLogged); nil on a read-only store.
	catSync *catalog.Syncer

	gate *gate.Gate // every call passes it; Close closes it

	writeMu sync.Mutex // serialises writers; guards w and failed
	w       bloblog.Writer
	failed  error // set once the catalog failed; writes return it

	filesMu sync.RWMutex
	files   map[uint32]*bloblog.File // catalogued blob files, each holding the registry's reference
	recs    map[uint32]blobRecord    // their catalogued records

	models sync.Map // format.Fingerprint -> *format.ModelSpec known to be catalogued
	st     counters
	ops    opsState   // compaction, GC, capacity, access statistics, events (ops.go)
	space  spaceState // the disk space reserve (space.go)

	reconciled ReconcileReport // what Open found in the blob log (reconcile.go)
}

// enter starts a call: ErrClosed after Close. Every successful enter is
// paired with leave.
func (db *DB) enter() error {
	if !db.gate.Enter() {
		return ErrClosed
	}
	return nil
}

func (db *DB) leave() { db.gate.Leave() }

// commit commits b durably, counting it; a catalog failure that needs a
// reopen is remembered so that later writes fail fast. Writers only.
func (db *DB) commit(b *pebble.Batch) error {
	return db.failedBy(timed(&db.st.catalogSyncs, &db.st.catalogSyncNanos, func() error { return db.cat.Commit(b) }))
}

// commitLogged commits b without waiting for the catalog's WAL to sync, as
// commit does otherwise: for a batch whose every change the blob log holds
// in records fdatasynced before it (put records and tombstones), so that
// the blob log, not the catalog, is what makes the change durable: a crash
// that loses the batch leaves records past the catalog's ends, and Open's
// reconcile applies them again (docs/decisions.md, "The blob log is the
// log of record"). Writers only.
//
// The catalog's syncer is then asked to sync the WAL in the background
// (catalog.Syncer), so that the catalog lags the blob log by about one
// WAL fsync, and a reconcile after a crash has little to read.
func (db *DB) commitLogged(b *pebble.Batch) error {
	if err := db.failedBy(db.cat.CommitUnsynced(b)); err != nil {
		return err
	}
	db.st.catalogUnsynced.Add(1)
	if db.catSync != nil {
		db.catSync.Kick()
	}
	return nil
}

// startCatalogSync starts the catalog's syncer (a writable store only),
// its syncs counted with the synced commits.
func (db *DB) startCatalogSync() {
	db.catSync = db.cat.StartSyncer(func(d time.Duration) {
		db.st.catalogSyncNanos.Add(uint64(d))
		db.st.catalogSyncs.observe(d)
	})
}

// syncFailure returns the failure of the catalog's background sync, if one
// failed, for write to remember in db.failed (writer lock held); nil
// otherwise.
func (db *DB) syncFailure() error {
	if db.catSync == nil {
		return nil
	}
	return db.catSync.Err()
}

// failedBy remembers a catalog failure that needs a reopen, so that later
// writes fail fast, and returns err.
func (db *DB) failedBy(err error) error {
	if errors.Is(err, ErrFailed) {
		db.failed = err
	}
	return err
}

// file takes a reference on blob file num for a reader; nil if the file is
// not catalogued (or is being retired).
func (db *DB) file(num uint32) *bloblog.File {
	db.filesMu.RLock()
	f := db.files[num]
	db.filesMu.RUnlock()
	if f == nil || !f.Acquire() {
		return nil
	}
	return f
}

// addFile registers a blob file with the registry's reference.
func (db *DB) addFile(r blobRecord) {
	f := bloblog.NewFile(db.fs, db.w.Dir, r.Num, !db.opts.DisableMmap, uint64(db.opts.BlobFileSize), db.log)
	r.Path = f.Path()
	db.filesMu.Lock()
	db.files[r.Num] = f
	db.recs[r.Num] = r
	db.filesMu.Unlock()
}

// dropFile unregisters a blob file and drops the registry's reference.
func (db *DB) dropFile(num uint32) {
	db.filesMu.Lock()
	f := db.files[num]
	delete(db.files, num)
	delete(db.recs, num)
	db.filesMu.Unlock()
	if f != nil {
		f.Release()
	}
}

// record returns blob file num's catalogued record.
func (db *DB) record(num uint32) (blobRecord, bool) {
	db.filesMu.RLock()
	defer db.filesMu.RUnlock()
	r, ok := db.recs[num]
	return r, ok
}

// setRecords installs records that a committed batch wrote.
func (db *DB) setRecords(rs ...blobRecord) {
	db.filesMu.Lock()
	for _, r := range rs {
		r.Path = db.files[r.Num].Path()
		db.recs[r.Num] = r
	}
	db.filesMu.Unlock()
}

// BlobFiles returns the catalogued blob files in file number order, with the
// number of views holding each. It works on a closed DB too (empty then).
func (db *DB) BlobFiles() []BlobFileInfo {
	return mapSlice(db.blobRecords(), fromBlobRecord)
}

// blobRecords is BlobFiles as the catalog's records.
func (db *DB) blobRecords() []blobRecord {
	out, _ := db.blobFiles()
	return out
}

// blobFiles is BlobFiles and, read under the same lock, the number of
// span memories (whose extents the records count as live extents too);
// both empty on a closed DB.
func (db *DB) blobFiles() ([]blobRecord, uint64) {
	db.filesMu.RLock()
	out := make([]blobRecord, 0, len(db.recs))
	for num, r := range db.recs {
		r.Views = db.files[num].Views()
		out = append(out, r)
	}
	spans := max(db.st.spanMemories.Load(), 0)
	if len(out) == 0 {
		spans = 0 // closed (or never written)
	}
	db.filesMu.RUnlock()
	slices.SortFunc(out, func(a, b blobRecord) int { return int(int64(a.Num) - int64(b.Num)) })
	return out, uint64(spans)
}

// rawFd is f's OS descriptor when the store's files are the OS's own
// (Options.FS is vfs.Default), for system calls that bypass vfs.File
// (vectored writes); vfs.InvalidFd otherwise, so that a wrapping FS (fault
// injection in tests, an encrypting FS) sees every write.
func (db *DB) rawFd(f vfs.File) uintptr {
	if db.opts.FS != vfs.Default {
		return vfs.InvalidFd
	}
	return f.Fd()
}
