//go:build !amd64 || purego

package reconstruct

// The row kernels have no SIMD version on this platform or under purego:
// the Fast functions do nothing and report so.

func eigenGerFast(a []float64, lda, m, n int, x, u []float64) bool { return false }

func eigenGer2Fast(a []float64, lda, m, n int, x, u, y, v []float64) bool { return false }

func eigenGemvFast(y, a []float64, lda, m, n int, v []float64) bool { return false }

func eigenGemvTFast(y, a []float64, lda, m, n int, v []float64) int { return 0 }

func eigenPivotsFast(d, esq []float64, lam *[8]float64, n int, dp, ip, dm, im []float64) (float64, bool) {
	return 0, false
}

func eigenRotFast(x, y []float64, c, s float64) bool { return false }

func eigenSyrFast(a []float64, lda, m int, x []float64) bool { return false }
