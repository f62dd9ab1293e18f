//go:build linux

package lock

import (
	"os"

	"golang.org/x/sys/unix"
)

// A waiting writer's mark is an open file description lock (F_OFD_SETLK)
// for writing on byte 0 of DIR/LOCK. Linux keeps these apart from flock
// locks, so the mark and the store lock live on the same file without
// seeing each other; a reader tests for the mark with F_OFD_GETLK. The
// mark goes away with the file, so a writer that dies leaves none.

func markWaiting(f *os.File) bool {
	lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: 0, Start: 0, Len: 1}
	return unix.FcntlFlock(f.Fd(), unix.F_OFD_SETLK, &lk) == nil
}

func unmarkWaiting(f *os.File) {
	lk := unix.Flock_t{Type: unix.F_UNLCK, Whence: 0, Start: 0, Len: 1}
	_ = unix.FcntlFlock(f.Fd(), unix.F_OFD_SETLK, &lk)
}

func writerWaiting(f *os.File) bool {
	lk := unix.Flock_t{Type: unix.F_RDLCK, Whence: 0, Start: 0, Len: 1}
	if err := unix.FcntlFlock(f.Fd(), unix.F_OFD_GETLK, &lk); err != nil {
		return false // no OFD locks here (an old kernel): no fairness, no refusal
	}
	return lk.Type != unix.F_UNLCK
}
