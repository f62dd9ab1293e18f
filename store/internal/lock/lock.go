// Package lock takes a store's directory lock, DIR/LOCK. On the OS's file
// system (the store's Options.FS is vfs.Default) where flock exists
// (Linux, the BSDs, macOS), a read-write open takes it exclusively
// (LOCK_EX) and a read-only open shared (LOCK_SH), both without waiting:
// read-only opens of a store no writer holds run side by side, in one
// process or several, while a writer excludes every other open and any
// reader excludes a writer. flock locks belong to the open file, so two
// holders in one process conflict as two processes do. Elsewhere (another
// FS, such as the in-memory one; Windows) every open takes FS.Lock,
// exclusive.
//
// A read-write open may wait for the lock (DirWait). While it waits it
// marks the lock file as wanted by a writer (on Linux, an open file
// description lock on byte 0, which flock does not see), and read-only
// opens that arrive meanwhile are refused (ErrWriterWaiting), so readers
// that come and go cannot keep a shared lock held forever and starve it.
// The readers already in finish as they would; the writer gets the lock
// when the last leaves. A writer never waits unless asked to, and never
// for another writer, which may hold the lock as long as it runs.
//
// The lock file holds no bytes.
package lock

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// FlockSupported says whether this platform has flock, so that read-only
// holders can share the lock.
const FlockSupported = flockSupported

// ErrHeld: another holder has the lock. Its errors name the holding
// processes where the OS says (Linux's /proc/locks): "held by another
// open: process 1234 (kvstore)", or "this process" for a second open in
// the same one.
var ErrHeld = errors.New("held by another open")

// held is ErrHeld for the lock file at path, naming its holders when
// known.
func held(path string) error {
	if who := holders(path); who != "" {
		return fmt.Errorf("%w: %s", ErrHeld, who)
	}
	return ErrHeld
}

// ErrWriterWaiting: a read-only open was refused because a read-write
// open is waiting for the lock. It wraps ErrHeld.
var ErrWriterWaiting = fmt.Errorf("%w: a read-write open is waiting for it", ErrHeld)

// Dir takes the lock file path of fs, shared when readOnly and the lock
// is a flock (optsFS, the FS the store was given, is vfs.Default), else
// exclusive through fs.Lock. Every holder of a store (Open, Recover) takes
// it here, so that they exclude each other with the same kind of lock:
// flock and fs.Lock's POSIX record locks do not see each other. The error
// of a held lock is ErrHeld (flock) or fs.Lock's.
func Dir(optsFS, fs vfs.FS, path string, readOnly bool) (lock io.Closer, shared bool, err error) {
	if optsFS == vfs.Default && flockSupported {
		lock, err = flockFile(path, readOnly)
		return lock, err == nil && readOnly, err
	}
	lock, err = fs.Lock(path)
	return lock, false, err
}

// DirWait is Dir for a read-write open that waits up to wait for the
// lock's holders to leave, keeping new readers out meanwhile (the package
// comment). With wait <= 0, or where the lock is not a flock, it is Dir.
func DirWait(optsFS, fs vfs.FS, path string, wait time.Duration) (io.Closer, error) {
	if wait <= 0 || optsFS != vfs.Default || !flockSupported {
		l, _, err := Dir(optsFS, fs, path, false)
		return l, err
	}
	return flockWait(path, wait)
}

// NoLockFS is an FS whose Lock takes nothing: for a read-only catalog
// under a shared store lock.
type NoLockFS struct{ vfs.FS }

// Lock takes nothing.
func (NoLockFS) Lock(string) (io.Closer, error) { return nopCloser{}, nil }

type nopCloser struct{}

func (nopCloser) Close() error { return nil }
