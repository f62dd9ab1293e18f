//go:build linux

package bloblog

import "golang.org/x/sys/unix"

// pwritev writes bufs, in order, at off of the file with descriptor fd with
// as few pwritev(2) calls as the kernel's IOV_MAX and short writes need.
// It returns the bytes written.
func pwritev(fd uintptr, bufs [][]byte, off int64) (int, error) {
	const iovMax = 1024
	total := 0
	for len(bufs) > 0 {
		batch := bufs[:min(len(bufs), iovMax)]
		n, err := unix.Pwritev(int(fd), batch, off)
		if err == unix.EINTR {
			continue // as os.File's writes do
		}
		if err != nil {
			return total, err
		}
		if n == 0 {
			return total, unix.EIO
		}
		total, off = total+n, off+int64(n)
		// Drop what was written: whole buffers, then a partial one.
		for n > 0 && len(bufs) > 0 {
			if n >= len(bufs[0]) {
				n -= len(bufs[0])
				bufs = bufs[1:]
				continue
			}
			bufs = append([][]byte{bufs[0][n:]}, bufs[1:]...)
			n = 0
		}
	}
	return total, nil
}

const haveVectoredWrites = true
