package store

import (
	"fmt"
	"strings"

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
	if db.opts.ReadOnly || db.opts.MustExist {
		return false, fmt.Errorf("%w: no store at %s (no FORMAT file)", ErrNotFound, db.dir)
	}
	if err := catalog.CheckLeftovers(db.fs, db.dir, lockFileName, catalogDirName, blobsDirName, formatTmpName, reserveFileName); err != nil {
		return false, err
	}
	// A store is created FORMAT last, after its first blob file could hold
	// anything: blob files without FORMAT are a store that lost it, not
	// the leftovers of a creation that crashed.
	if names, err := db.fs.List(db.w.Dir); err == nil {
		for _, n := range names {
			if strings.HasSuffix(n, ".blob") {
				return false, fmt.Errorf("%w: %s has blob files but no FORMAT file: refusing to start a new store over them", ErrCorruption, db.dir)
			}
		}
	}
	return true, nil
}

// checkEmptyCatalog refuses to create a store over a catalog that holds
// records: FORMAT was lost, the packets were not (ErrCorruption).
func (db *DB) checkEmptyCatalog() error {
	found := false
	err := db.cat.Scan(nil, nil, func(k, _ []byte) (bool, error) {
		found = true
		return false, nil
	})
	switch {
	case err != nil:
		return fmt.Errorf("store: scan catalog of %s: %w", db.dir, err)
	case found:
		return fmt.Errorf("%w: %s has a catalog with records but no FORMAT file: refusing to start a new store over it", ErrCorruption, db.dir)
	}
	return nil
}

// writeFormat writes FORMAT atomically and syncs the directory, which
// also makes catalog/ and blobs/ durable. It is the last step of creating
// a store.
func (db *DB) writeFormat() error { return catalog.WriteFormat(db.fs, db.dir) }
