//go:build amd64 && !purego

package reconstruct

import "golang.org/x/sys/cpu"

// dotFMA says whether the kernels of gram_amd64.s and eigen_amd64.s can
// run.
var dotFMA = cpu.X86.HasAVX2 && cpu.X86.HasFMA

// dot4x2F32 computes the four-lane part of dotF32 for the tile
// C[0:4][0:2] over l < k4 (a multiple of 4, at least 4); strides in
// elements.
//
//go:noescape
func dot4x2F32(c *float64, a, b *float32, ldc, lda, ldb, k4 int)

// dotF32Fast writes the four-lane part of every element of C in rows
// [0, m&^3) and columns [0, n&^1) with the AVX2 kernel and reports whether
// it did (false without AVX2 and FMA). Shapes are checked by dotF32.
func dotF32Fast(c []float64, ldc int, a []float32, lda int, b []float32, ldb int, m, n, k4 int) bool {
	if !dotFMA || m < 4 || n < 2 {
		return false
	}
	for i := 0; i+4 <= m; i += 4 {
		for j := 0; j+2 <= n; j += 2 {
			dot4x2F32(&c[i*ldc+j], &a[i*lda], &b[j*ldb], ldc, lda, ldb, k4)
		}
	}
	return true
}

// mul4x8F64F32 computes the tile C[0:4][0:8] of mulF64F32 over all k >= 1.
//
//go:noescape
func mul4x8F64F32(c, a *float64, b *float32, ldc, lda, ldb, k int)

// mulF64F32Fast computes the elements of mulF64F32 in rows [0, m&^3) and
// columns [0, n&^7) with the AVX2 kernel and reports whether it did.
func mulF64F32Fast(c []float64, ldc int, a []float64, lda int, b []float32, ldb int, m, n, k int) bool {
	if !dotFMA || m < 4 || n < 8 {
		return false
	}
	for j := 0; j+8 <= n; j += 8 {
		for i := 0; i+4 <= m; i += 4 {
			mul4x8F64F32(&c[i*ldc+j], &a[i*lda], &b[j], ldc, lda, ldb, k)
		}
	}
	return true
}

// sumSquares16F32 is the sixteen-lane part of sumSquaresF32 over n16
// elements, a multiple of 16 (at least 16).
//
//go:noescape
func sumSquares16F32(a *float32, n16 int) float64

// sumSquaresFast computes sumSquaresGo(a), len(a) a multiple of 16, with
// the AVX2 kernel and reports whether it did.
func sumSquaresFast(a []float32) (float64, bool) {
	if !dotFMA {
		return 0, false
	}
	if len(a) == 0 {
		return 0, true
	}
	return sumSquares16F32(&a[0], len(a)), true
}
