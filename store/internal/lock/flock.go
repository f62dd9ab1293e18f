//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package lock

import (
	"io"
	"os"

	"golang.org/x/sys/unix"
)

const flockSupported = true

// flockFile opens path (creating it if absent) and flocks it, shared or
// exclusive, without waiting.
func flockFile(path string, shared bool) (io.Closer, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		if f, err = os.Open(path); err != nil { // a read-only directory
			return nil, err
		}
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
