//go:build !amd64 || purego

package rowcopy

import "unsafe"

// kernel has no SIMD code here: the portable loop runs.
func kernel(dst, src unsafe.Pointer, rows, rb, ds, ss int) bool { return false }

// streamKernel has no SIMD code here: Copy runs.
func streamKernel(dst, src unsafe.Pointer, rows, rb, ds, ss int) bool { return false }

// Fence has nothing to order here: no store is non-temporal.
func Fence() {}

// prefetch has no hint to give here.
func prefetch(p unsafe.Pointer, rows, rb, stride int) {}
