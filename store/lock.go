package store

import (
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/kvstore/kvstore/store/internal/lock"
)

// The store's lock, DIR/LOCK (store/internal/lock): flock, exclusive for
// read-write opens and shared for read-only ones, on the OS's file system;
// FS.Lock, exclusive, elsewhere. A held lock is ErrLocked. The catalog's
// own lock (catalog/LOCK, Pebble's, always exclusive) is skipped for
// read-only opens under a shared store lock: DIR/LOCK already keeps
// writers out, and a read-only Pebble writes nothing.

// flockSupported says whether read-only opens share the lock here.
const flockSupported = lock.FlockSupported

// lockStore takes DIR/LOCK for db's open: ErrLocked if it is held. A
// directory that creating a store there would refuse (it has no FORMAT
// file and holds files a store does not: checkFormat) is refused first,
// so that the refusal leaves no LOCK file in someone else's directory;
// checkFormat checks again under the lock.
func (db *DB) lockStore() error {
	if !db.opts.ReadOnly && !db.opts.MustExist && db.absent(formatFileName) && db.absent(formatCopyName) {
		if err := db.checkLeftovers(); err != nil {
			return err
		}
	}
	l, shared, err := lockDir(db.opts.FS, db.fs, db.dir, db.opts.ReadOnly, db.opts.LockWait)
	if err != nil {
		return err
	}
	db.lock, db.sharedLock = l, shared
	return nil
}

// absent says whether DIR/name does not exist.
func (db *DB) absent(name string) bool {
	_, err := db.fs.Stat(db.fs.PathJoin(db.dir, name))
	return errors.Is(err, iofs.ErrNotExist)
}

// lockDir takes DIR/LOCK of the store in dir (lock.Dir; lock.DirWait for
// a read-write open given a wait); ErrLocked if it is held.
func lockDir(optsFS, fs vfs.FS, dir string, readOnly bool, wait time.Duration) (io.Closer, bool, error) {
	path := fs.PathJoin(dir, lockFileName)
	var l io.Closer
	var shared bool
	var err error
	if readOnly || wait <= 0 {
		l, shared, err = lock.Dir(optsFS, fs, path, readOnly)
	} else {
		l, err = lock.DirWait(optsFS, fs, path, wait)
	}
	if err != nil {
		return nil, false, fmt.Errorf("%w: %s: %v", ErrLocked, dir, err)
	}
	return l, shared, nil
}

// catalogOptions are the options the catalog opens with: db's, with the
// catalog's own lock skipped under a shared store lock.
func (db *DB) catalogOptions() *Options {
	o := db.opts
	if db.sharedLock {
		o.FS = lock.NoLockFS{FS: o.FS}
	}
	return &o
}
