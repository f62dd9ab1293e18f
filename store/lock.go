package store

import (
	"errors"
	"fmt"
	"io"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// The store's lock, DIR/LOCK. On the OS's file system (Options.FS is
// vfs.Default) where flock exists (Linux, the BSDs, macOS), a read-write
// Open takes it exclusively (LOCK_EX) and a read-only Open shared
// (LOCK_SH), both without waiting: read-only opens of a store no writer
// holds run side by side, in one process or several, while a writer
// excludes every other open and any reader excludes a writer (ErrLocked).
// flock locks belong to the open file, so two DBs in one process conflict
// as two processes do. The catalog's own lock (catalog/LOCK, Pebble's,
// always exclusive) is then skipped for read-only opens: DIR/LOCK already
// keeps writers out, and a read-only Pebble writes nothing.
//
// Elsewhere (another FS, such as the in-memory one; Windows) every Open
// takes FS.Lock, exclusive: one DB at a time, read-only included.

// lockStore takes DIR/LOCK for db's open: ErrLocked if it is held.
func (db *DB) lockStore() error {
	path := db.fs.PathJoin(db.dir, lockFileName)
	var (
		lock io.Closer
		err  error
	)
	if db.opts.FS == vfs.Default && flockSupported {
		lock, err = flockFile(path, db.opts.ReadOnly)
		db.sharedLock = err == nil && db.opts.ReadOnly
	} else {
		lock, err = db.fs.Lock(path)
	}
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrLocked, db.dir, err)
	}
	db.lock = lock
	return nil
}

// catalogOptions are the options the catalog opens with: db's, with the
// catalog's own lock skipped under a shared store lock.
func (db *DB) catalogOptions() *Options {
	o := db.opts
	if db.sharedLock {
		o.FS = noLockFS{o.FS}
	}
	return &o
}

// noLockFS is an FS whose Lock takes nothing: for a read-only catalog
// under a shared store lock.
type noLockFS struct{ vfs.FS }

func (noLockFS) Lock(string) (io.Closer, error) { return nopCloser{}, nil }

// errHeld: another open holds the lock.
var errHeld = errors.New("held by another open (flock)")

type nopCloser struct{}

func (nopCloser) Close() error { return nil }
