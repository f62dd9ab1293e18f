package store

import (
	"errors"
	"fmt"
	"time"

	"github.com/kvstore/kvstore/store/internal/bloblog"
	"github.com/kvstore/kvstore/store/internal/space"
)

// Close closes the store: the catalog, the active blob file and the LOCK.
// It refuses new calls (they return ErrClosed) and waits for those in
// flight, so it must not be called from a callback (Headers). It does not
// wait for Views: those still held keep their blob files mapped (and open)
// until released, and stay readable. A second Close returns ErrClosed.
//
// Close saves the access statistics (eviction's ordering hints) only if
// the catalog can take them at once: on a full disk, or while the
// catalog's memtables wait on a flush, it drops them after at most
// closeAccessWait, logging a warning, and Close does not fail for it
// (docs/decisions.md, "A full disk never hangs the store").
func (db *DB) Close() error {
	if !db.gate.Close() {
		return ErrClosed
	}
	if ferr := db.closeAccess(); ferr != nil {
		db.log.Warn("store: saving access statistics at close", "dir", db.dir, "err", ferr)
	}
	err := db.w.Close()
	if cerr := db.closeCatalog(); err == nil {
		err = cerr
	}
	if n := db.st.views.Load(); n > 0 {
		db.log.Warn("store: closed with views outstanding; their blob files stay mapped until they are released", "dir", db.dir, "views", n)
	}
	db.closeFiles()
	if lerr := db.lock.Close(); err == nil && lerr != nil {
		err = fmt.Errorf("store: release %s/LOCK: %w", db.dir, lerr)
	}
	return noSpace(err)
}

// closeAccessWait is the longest Close waits for the catalog to take the
// access statistics (a flush in progress ending a write stall).
const closeAccessWait = time.Second

// closeAccess saves the access statistics at Close (the gate is closed),
// unless the catalog cannot take them within closeAccessWait.
func (db *DB) closeAccess() error { return db.flushAccess(closeAccessWait) }

// accessBatchBytes is the size of the batches the access statistics are
// saved in: a quarter memtable (at least 64 KiB), well below Pebble's
// large batches (half a memtable), which take a memtable of their own.
func accessBatchBytes(memTable uint64) int { return int(max(memTable/4, 64<<10)) }

// errCatalogBusy: Pebble could stall a commit behind a flush (catalogReady).
var errCatalogBusy = errors.New("store: the catalog's memtables wait on a flush (is the disk full?)")

// catalogReady reports, with an error, when the catalog cannot take an
// unsynced batch of n bytes that may as well be dropped (the access
// statistics) without risk: when the disk would keep less than the
// headroom (wrapping ErrNoSpace), or when Pebble could stall the commit
// behind a flush (space.CatalogBusy) for longer than wait.
func (db *DB) catalogReady(n uint64, wait time.Duration) error {
	if free, ok := db.space.Fits(n); !ok {
		return fmt.Errorf("%w: %d bytes free, less than the catalog keeps: access statistics not saved", ErrNoSpace, free)
	}
	deadline := time.Now().Add(wait)
	for space.CatalogBusy(db.cat.DB.Metrics(), db.opts.CatalogMemTableSize, n) {
		if !time.Now().Before(deadline) {
			return fmt.Errorf("%w: access statistics not saved", errCatalogBusy)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return nil
}

// closeFiles drops the registry's references on every blob file.
func (db *DB) closeFiles() {
	db.filesMu.Lock()
	files := db.files
	db.files = map[uint32]*bloblog.File{}
	db.recs = map[uint32]blobRecord{}
	db.filesMu.Unlock()
	for _, f := range files {
		f.Release()
	}
}

// closeCatalog stops the catalog's syncer and closes the catalog, which
// syncs its WAL. After a fatal catalog error Pebble may report another one
// while closing; that too becomes an error, and the first failure is what
// Close returns.
func (db *DB) closeCatalog() error {
	if db.catSync != nil {
		if serr := db.catSync.Stop(); db.failed == nil {
			db.failed = serr
		}
	}
	err := db.cat.Close()
	if db.failed != nil {
		err = db.failed
	}
	return err
}
