//go:build !linux

package bloblog

import "errors"

// pwritev is not used where the platform has no pwritev(2) wired up here:
// haveVectoredWrites is false and writes go one buffer at a time.
func pwritev(fd uintptr, bufs [][]byte, off int64) (int, error) {
	return 0, errors.ErrUnsupported
}

const haveVectoredWrites = false
