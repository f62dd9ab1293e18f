//go:build !unix

package bloblog

import "errors"

// MmapSupported reports whether this platform can map blob files.
const MmapSupported = false

var errNoMmap = errors.New("kvstore/store: mmap is not supported on this platform")

func mmapFile(fd uintptr, length int) ([]byte, error) { return nil, errNoMmap }

func munmapFile(b []byte) error { return errNoMmap }
