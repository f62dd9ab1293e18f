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
	lock, shared, err := lockDir(db.opts.FS, db.fs, db.dir, db.opts.ReadOnly)
	if err != nil {
		return err
	}
	db.lock, db.sharedLock = lock, shared
	return nil
}

// lockDir takes DIR/LOCK of the store in dir, shared when readOnly and
// the lock is a flock (optsFS, Options.FS as given, is vfs.Default), else
// exclusive through fs.Lock; ErrLocked if it is held. Every holder of a
// store (Open, Recover) takes it here, so that they exclude each other
// with the same kind of lock: flock and fs.Lock's POSIX record locks do
// not see each other.
func lockDir(optsFS, fs vfs.FS, dir string, readOnly bool) (lock io.Closer, shared bool, err error) {
	path := fs.PathJoin(dir, lockFileName)
	if optsFS == vfs.Default && flockSupported {
		lock, err = flockFile(path, readOnly)
		shared = err == nil && readOnly
	} else {
		lock, err = fs.Lock(path)
	}
	if err != nil {
		return nil, false, fmt.Errorf("%w: %s: %v", ErrLocked, dir, err)
	}
	return lock, shared, nil
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
