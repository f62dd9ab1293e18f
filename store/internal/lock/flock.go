//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package lock

import (
	"io"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

const flockSupported = true

// openLockFile opens path, creating it if absent (read-only when the
// directory is).
func openLockFile(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		if f, err = os.Open(path); err != nil { // a read-only directory
			return nil, err
		}
	}
	return f, nil
}

// flockFile opens path (creating it if absent) and flocks it, shared or
// exclusive, without waiting. A shared lock is also refused while a writer
// waits for the lock (ErrWriterWaiting).
func flockFile(path string, shared bool) (io.Closer, error) {
	f, err := openLockFile(path)
	if err != nil {
		return nil, err
	}
	if shared && writerWaiting(f) {
		_ = f.Close()
		return nil, ErrWriterWaiting
	}
	how := unix.LOCK_EX
	if shared {
		how = unix.LOCK_SH
	}
	if err := unix.Flock(int(f.Fd()), how|unix.LOCK_NB); err != nil {
		_ = f.Close()
		if err == unix.EWOULDBLOCK {
			return nil, held(path)
		}
		return nil, err
	}
	return f, nil // closing the file releases the lock
}

// writerHolds says whether path's flock is held exclusively: a shared
// lock, tried on a file of its own, is refused.
func writerHolds(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	return unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB) == unix.EWOULDBLOCK
}

// flockWait takes path's exclusive flock, waiting up to wait for the
// holders to leave when they are readers (a writer holding it is ErrHeld
// at once). From its first refused try until it returns it marks
// the file as wanted by a writer (markWaiting), so that read-only opens
// arriving meanwhile are refused instead of keeping a shared lock held
// forever between them.
func flockWait(path string, wait time.Duration) (io.Closer, error) {
	f, err := openLockFile(path)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(wait)
	pause := time.Millisecond
	marked := false
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			if marked {
				unmarkWaiting(f)
			}
			return f, nil
		}
		if err != unix.EWOULDBLOCK {
			_ = f.Close()
			return nil, err
		}
		if !marked {
			// A writer holding the lock is not waited for: it may hold it
			// for as long as it runs (a server). Only readers are.
			if writerHolds(path) {
				_ = f.Close()
				return nil, held(path)
			}
			// Another waiting writer may hold the mark already: this one
			// then waits behind it, unmarked.
			marked = markWaiting(f)
		}
		if !time.Now().Before(deadline) {
			_ = f.Close() // releases the mark with the file
			return nil, held(path)
		}
		time.Sleep(min(pause, time.Until(deadline)))
		pause = min(2*pause, 20*time.Millisecond)
	}
}
