//go:build amd64 && !purego

package reconstruct

// The AVX2 and FMA row kernels of eigen_amd64.s (dotFMA says whether they
// can run). Strides are in elements, m, n >= 1.

//go:noescape
func eigenGerAVX2(a *float64, lda, m, n int, x, u *float64)

//go:noescape
func eigenGer2AVX2(a *float64, lda, m, n int, x, u, y, v *float64)

//go:noescape
func eigenGemvAVX2(y, a *float64, lda, m, n int, v *float64)

//go:noescape
func eigenGemvTAVX2(y, a *float64, lda, m, n int, v *float64)

//go:noescape
func eigenPivots8AVX2(d, esq, lam *float64, n int, dp, ip, dm, im *float64) float64

// eigenPivotsFast does all of pivots, returning the smallest |pivot|, and
// reports whether it did.
func eigenPivotsFast(d, esq []float64, lam *[8]float64, n int, dp, ip, dm, im []float64) (float64, bool) {
	if !dotFMA || n < 1 || len(d) < n || len(esq) < n || len(dp) < 8*n || len(ip) < 8*n || len(dm) < 8*n || len(im) < 8*n {
		return 0, false
	}
	return eigenPivots8AVX2(&d[0], &esq[0], &lam[0], n, &dp[0], &ip[0], &dm[0], &im[0]), true
}

//go:noescape
func eigenRotAVX2(x, y *float64, n int, c, s float64)

// eigenGerFast does all of ger and reports whether it did.
func eigenGerFast(a []float64, lda, m, n int, x, u []float64) bool {
	if !dotFMA {
		return false
	}
	if m > 0 && n > 0 {
		eigenGerAVX2(&a[0], lda, m, n, &x[0], &u[0])
	}
	return true
}

// eigenGer2Fast does all of ger2 and reports whether it did.
func eigenGer2Fast(a []float64, lda, m, n int, x, u, y, v []float64) bool {
	if !dotFMA {
		return false
	}
	if m > 0 && n > 0 {
		eigenGer2AVX2(&a[0], lda, m, n, &x[0], &u[0], &y[0], &v[0])
	}
	return true
}

// eigenGemvFast does all of gemv and reports whether it did.
func eigenGemvFast(y, a []float64, lda, m, n int, v []float64) bool {
	if !dotFMA {
		return false
	}
	if m > 0 {
		if n == 0 {
			clear(y[:m])
		} else {
			eigenGemvAVX2(&y[0], &a[0], lda, m, n, &v[0])
		}
	}
	return true
}

// eigenGemvTFast does the columns n &^ 3 of gemvT, and reports how many
// it did.
func eigenGemvTFast(y, a []float64, lda, m, n int, v []float64) int {
	if !dotFMA || m == 0 || n < 4 {
		return 0
	}
	eigenGemvTAVX2(&y[0], &a[0], lda, m, n&^3, &v[0])
	return n &^ 3
}

// eigenRotFast does all of rot (len(y) == len(x)) and reports whether it
// did.
func eigenRotFast(x, y []float64, c, s float64) bool {
	if !dotFMA {
		return false
	}
	if len(x) > 0 {
		eigenRotAVX2(&x[0], &y[0], len(x), c, s)
	}
	return true
}

//go:noescape
func eigenSyrAVX2(a *float64, lda, m int, x *float64)

// eigenSyrFast does all of syr (rows of any length, their tails included)
// and reports whether it did.
func eigenSyrFast(a []float64, lda, m int, x []float64) bool {
	if !dotFMA {
		return false
	}
	if m > 0 {
		eigenSyrAVX2(&a[0], lda, m, &x[0])
	}
	return true
}
