//go:build !amd64 || purego

package reconstruct

// The products here have no SIMD kernel on this platform or under purego:
// the Fast functions compute nothing and leave every element to the
// portable loops.

func dotF32Fast(c []float64, ldc int, a []float32, lda int, b []float32, ldb int, m, n, k4 int) bool {
	return false
}

func mulF64F32Fast(c []float64, ldc int, a []float64, lda int, b []float32, ldb int, m, n, k int) bool {
	return false
}

func sumSquaresFast(a []float32) (float64, bool) { return 0, false }
