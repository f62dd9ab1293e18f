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

// streamRowsAVX2 is copyRowsAVX2 storing with VMOVNTDQ; dst and ds are
// multiples of 32. It issues no fence (Fence).
//
//go:noescape
func streamRowsAVX2(dst, src unsafe.Pointer, rows, rb, ds, ss int)

// streamKernel runs the AVX2 streaming kernel when it fits and reports
// whether it did.
func streamKernel(dst, src unsafe.Pointer, rows, rb, ds, ss int) bool {
	if !hasAVX2 || rb%32 != 0 {
		return false
	}
	streamRowsAVX2(dst, src, rows, rb, ds, ss)
	return true
}

// Fence orders the non-temporal stores Stream (and reconstruct's
// StreamRows) made on this goroutine before what follows: SFENCE.
func Fence()

// prefetch hints rows rows of rb bytes at stride into the cache, one
// PREFETCHT0 per 64 bytes; rows >= 1, rb >= 1.
//
//go:noescape
func prefetch(p unsafe.Pointer, rows, rb, stride int)
