//go:build amd64 && !purego

package rowcopy

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

var hasAVX2 = cpu.X86.HasAVX2

// copyRowsAVX2 copies rows of rb bytes (a multiple of 32, rows >= 1) at
// byte strides ds and ss. See rowcopy_amd64.s.
//
//go:noescape
func copyRowsAVX2(dst, src unsafe.Pointer, rows, rb, ds, ss int)

// kernel runs the AVX2 kernel that fits and reports whether one did.
func kernel(dst, src unsafe.Pointer, rows, rb, ds, ss int) bool {
	if !hasAVX2 || rb%32 != 0 {
		return false
	}
	copyRowsAVX2(dst, src, rows, rb, ds, ss)
	return true
}
