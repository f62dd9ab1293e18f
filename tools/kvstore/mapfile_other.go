//go:build !unix

package main

import (
	"fmt"
	"io"
	"os"
)

// mapFile reads the size bytes of f into memory: without mmap (this
// platform), import holds the whole file.
func mapFile(f *os.File, size int64) (data []byte, release func(), err error) {
	b := make([]byte, size)
	if _, err := io.ReadFull(f, b); err != nil {
		return nil, nil, fmt.Errorf("read %s: %w", f.Name(), err)
	}
	return b, func() {}, nil
}
