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
