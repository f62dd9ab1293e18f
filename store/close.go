package store

import (
	"fmt"

	"github.com/kvstore/kvstore/store/internal/bloblog"
)

// Close closes the store: the catalog, the active blob file and the LOCK.
// It refuses new calls (they return ErrClosed) and waits for those in
// flight, so it must not be called from a callback (Headers). It does not
// wait for Views: those still held keep their blob files mapped (and open)
// until released, and stay readable. A second Close returns ErrClosed.
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
