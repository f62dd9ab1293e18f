//go:build unix

package bloblog

import "golang.org/x/sys/unix"

// MmapSupported reports whether this platform can map blob files.
const MmapSupported = true

// mmapFile maps the first length bytes of the file fd read-only and shared.
// length may exceed the file's size; bytes past it must not be touched.
func mmapFile(fd uintptr, length int) ([]byte, error) {
	return unix.Mmap(int(fd), 0, length, unix.PROT_READ, unix.MAP_SHARED)
}

// munmapFile undoes mmapFile.
func munmapFile(b []byte) error { return unix.Munmap(b) }
