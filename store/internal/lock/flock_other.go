//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package lock

import (
	"errors"
	"io"
	"time"
)

const flockSupported = false

func flockFile(path string, shared bool) (io.Closer, error) {
	return nil, errors.New("flock is not supported on this platform")
}

func flockWait(path string, wait time.Duration) (io.Closer, error) {
	return nil, errors.New("flock is not supported on this platform")
}
