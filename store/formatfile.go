package store

import (
	"errors"
	"fmt"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store/internal/catalog"
)

// The FORMAT file (store/internal/catalog, docs/format.md "FORMAT file")
// is kept twice, DIR/FORMAT and DIR/FORMAT.copy. Open trusts whichever
// copy is good and refuses the store only when neither is; a read-write
// Open rewrites both when one is missing, damaged or older, and when the
// store is at an older version than format.Current: that is when a store
// moves to a newer format (a ratchet, as Pebble's format major version:
// an older minor is written up before anything else is, a store is never
// written down). A read-only Open writes nothing. RecoverFormat rewrites
// them for a store Open refuses.

// recoverFormatHint is the remedy Open names for a store without a good
// FORMAT file.
const recoverFormatHint = "kvstore recover --format-only rewrites it from the blob files' headers and keeps the catalog (store.RecoverFormat)"

// checkFormat reads DIR/FORMAT and DIR/FORMAT.copy. It reports create
// when the store is to be created: neither exists, and nothing in the
// directory but what an interrupted creation leaves. Otherwise f is what
// was found.
func (db *DB) checkFormat() (f catalog.Format, create bool, err error) {
	f, err = catalog.ReadFormat(db.fs, db.dir)
	switch {
	case errors.Is(err, ErrVersion):
		return f, false, err
	case err != nil:
		return f, false, fmt.Errorf("%w: %s", err, recoverFormatHint)
	case f.Found:
		return f, false, nil
	}
	// A store is created FORMAT last, after its first blob file could hold
	// anything: blob files without FORMAT are a store that lost it, not
	// the leftovers of a creation that crashed.
	if err := catalog.LostFormat(db.fs, db.dir, blobsDirName); err != nil {
		return f, false, fmt.Errorf("%w: refusing to start a new store over them; %s", err, recoverFormatHint)
	}
	if db.opts.ReadOnly || db.opts.MustExist {
		return f, false, fmt.Errorf("%w: no store at %s (no FORMAT file)", ErrNotFound, db.dir)
	}
	if err := db.checkLeftovers(); err != nil {
		return f, false, err
	}
	return f, true, nil
}

// checkLeftovers refuses a directory without a FORMAT file that holds a
// file a store being created could not have left (catalog.CheckLeftovers):
// someone else's directory.
func (db *DB) checkLeftovers() error {
	return catalog.CheckLeftovers(db.fs, db.dir, lockFileName, catalogDirName, blobsDirName, formatTmpName, reserveFileName)
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
		return fmt.Errorf("%w: %s has a catalog with records but neither FORMAT nor FORMAT.copy: refusing to start a new store over it; %s",
			ErrCorruption, db.dir, recoverFormatHint)
	}
	return nil
}

// writeFormat writes both copies of FORMAT at format.Current, atomically,
// and syncs the directory, which also makes catalog/ and blobs/ durable.
// It is the last step of creating a store.
func (db *DB) writeFormat() error { return catalog.WriteFormat(db.fs, db.dir, format.Current) }

// upgradeFormat, on a read-write open of an existing store, rewrites both
// copies of FORMAT when f is stale: a copy is bad, or the store's version
// is older than format.Current. The version written is the newer of the
// store's and this build's (a newer minor stays). It runs before the
// store writes anything else, so a store this build writes to says so.
func (db *DB) upgradeFormat(f catalog.Format) error {
	if !f.Stale(format.Current) {
		return nil
	}
	v := f.Version
	if v.Compare(format.Current) < 0 {
		v = format.Current
	}
	if err := catalog.WriteFormat(db.fs, db.dir, v); err != nil {
		return err
	}
	if len(f.Bad) > 0 {
		db.log.Warn("store: rewrote the FORMAT files", "dir", db.dir, "found", f.Bad, "version", v.String())
	}
	if v != f.Version {
		db.log.Info("store: format upgraded", "dir", db.dir, "from", f.Version.String(), "to", v.String())
	}
	return nil
}

// logFormat warns, on a read-only open, of FORMAT copies a read-write
// open would rewrite.
func (db *DB) logFormat(f catalog.Format) {
	if len(f.Bad) > 0 {
		db.log.Warn("store: a FORMAT file is bad; the good copy is used, and a read-write open rewrites both", "dir", db.dir,
			"found", f.Bad, "version", f.Version.String())
	}
}
