//go:build !amd64 || purego

package reconstruct

import (
	"unsafe"

	"github.com/kvstore/kvstore/format"
)

// shiftAVX2 is false: no SIMD kernels on this platform or under purego.
const shiftAVX2 = false

// shiftAVX512 is false too (a variable, as on amd64, for the tests).
var shiftAVX512 = false

// shiftAVX512BF16 is false as well.
var shiftAVX512BF16 = false

// shiftRowsFast has no SIMD kernel here; the portable code runs.
func shiftRowsFast(dst, src unsafe.Pointer, dt format.DType, rows int, r *RoPE, c, s []float32) bool {
	return false
}

// shiftLanes holds no kernel tables here.
type shiftLanes struct{}

func newShiftLanes(r *RoPE, c, s []float32) shiftLanes { return shiftLanes{} }

// rows has no SIMD kernel here; the portable code runs.
func (l *shiftLanes) rows(dst, src unsafe.Pointer, dt format.DType, rows int, r *RoPE) bool {
	return false
}

// strided has no SIMD kernel here; the portable code runs.
func (l *shiftLanes) strided(dst, src unsafe.Pointer, dt format.DType, rows, ds, ss int, r *RoPE, stream bool) bool {
	return false
}

// shiftWide is false: no AVX-512 kernel here.
func shiftWide(r *RoPE, dt format.DType) bool { return false }
