//go:build !amd64 || purego

package reconstruct

// matmulFast has no SIMD kernel on this platform or under purego: it
// computes no column and leaves them all to the portable loop.
func matmulFast(c []float32, ldc int, a []float32, lda int, b []float32, ldb int, m, n, k int) int {
	return 0
}
