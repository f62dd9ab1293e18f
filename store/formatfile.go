package store

import (
	"fmt"

	"github.com/kvstore/kvstore/store/internal/catalog"
)

// checkFormat reads DIR/FORMAT (store/internal/catalog). It reports true
// when the store is to be created: no FORMAT, and nothing in the directory
// but what an interrupted creation leaves.
func (db *DB) checkFormat() (create bool, err error) {
	found, err := catalog.ReadFormat(db.fs, db.dir)
	if found || err != nil {
		return false, err
	}
	if db.opts.ReadOnly {
		return false, fmt.Errorf("%w: no store at %s (no FORMAT file)", ErrNotFound, db.dir)
	}
	if err := catalog.CheckLeftovers(db.fs, db.dir, lockFileName, catalogDirName, blobsDirName, formatTmpName); err != nil {
		return false, err
	}
	return true, nil
}

// writeFormat writes FORMAT atomically and syncs the directory, which
// also makes catalog/ and blobs/ durable. It is the last step of creating
// a store.
func (db *DB) writeFormat() error { return catalog.WriteFormat(db.fs, db.dir) }
