//go:build !amd64 || purego

package rowcopy

import "unsafe"

// kernel has no SIMD code here: the portable loop runs.
func kernel(dst, src unsafe.Pointer, rows, rb, ds, ss int) bool { return false }
