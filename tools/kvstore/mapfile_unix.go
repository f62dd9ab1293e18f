//go:build unix

package main

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// mapFile maps the size bytes of f read-only: import hands slices of the
// mapping to Put, so the packet's bytes are paged in from the file as Put
// reads them and never copied into the heap. release unmaps it; nothing
// may touch the slices after.
func mapFile(f *os.File, size int64) (data []byte, release func(), err error) {
	if size == 0 || int64(int(size)) != size {
		return nil, nil, fmt.Errorf("%s: cannot map %d bytes", f.Name(), size)
	}
	b, err := unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, nil, fmt.Errorf("mmap %s: %w", f.Name(), err)
	}
	_ = unix.Madvise(b, unix.MADV_SEQUENTIAL)
	return b, func() { _ = unix.Munmap(b) }, nil
}
