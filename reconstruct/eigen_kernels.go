package reconstruct

import (
	"fmt"
	"math"
)

// Row kernels of the small dense float64 factorisations (eigenWork.sym and
// the Cholesky factor of qrWork): rank-one and rank-two updates, matrix-
// vector products and plane rotations over contiguous rows. Each is
// defined by its portable loop (the ...Go function), which the AVX2
// kernels of eigen_amd64.s reproduce bit for bit: fma is math.FMA,
// rounded once, and the rotation rounds every product on its own. They
// panic when a slice is too short for the shape: an internal invariant,
// checked because the SIMD kernels read through pointers.

// ger sets a[i][l] = fma(-x[i], u[l], a[i][l]) for i < m, l < n: a -= x u^T.
func ger(a []float64, lda, m, n int, x, u []float64) {
	kernelCheck(len(a), lda, m, n, len(x) < m || len(u) < n)
	if !eigenGerFast(a, lda, m, n, x, u) {
		gerGo(a, lda, m, n, x, u)
	}
}

func gerGo(a []float64, lda, m, n int, x, u []float64) {
	for i := 0; i < m; i++ {
		row, xi := a[i*lda:i*lda+n], -x[i]
		for l, ul := range u[:n] {
			row[l] = math.FMA(xi, ul, row[l])
		}
	}
}

// ger2 sets a[i][l] = fma(-y[i], v[l], fma(-x[i], u[l], a[i][l])) for
// i < m, l < n: a -= x u^T + y v^T.
func ger2(a []float64, lda, m, n int, x, u, y, v []float64) {
	kernelCheck(len(a), lda, m, n, len(x) < m || len(y) < m || len(u) < n || len(v) < n)
	if !eigenGer2Fast(a, lda, m, n, x, u, y, v) {
		ger2Go(a, lda, m, n, x, u, y, v)
	}
}

func ger2Go(a []float64, lda, m, n int, x, u, y, v []float64) {
	for i := 0; i < m; i++ {
		row, xi, yi := a[i*lda:i*lda+n], -x[i], -y[i]
		vv := v[:n]
		for l, ul := range u[:n] {
			row[l] = math.FMA(yi, vv[l], math.FMA(xi, ul, row[l]))
		}
	}
}

// gemv sets y[i] to the dot product of row i of a (m x n) with v, summed
// as dotTail64(dotLanes64(row, v, n &^ 3), row, v, n &^ 3).
func gemv(y, a []float64, lda, m, n int, v []float64) {
	kernelCheck(len(a), lda, m, n, len(y) < m || len(v) < n)
	if !eigenGemvFast(y, a, lda, m, n, v) {
		gemvGo(y, a, lda, m, n, v)
	}
}

func gemvGo(y, a []float64, lda, m, n int, v []float64) {
	for i := 0; i < m; i++ {
		row := a[i*lda : i*lda+n]
		y[i] = dotTail64(dotLanes64(row, v, n&^3), row, v[:n], n&^3)
	}
}

// gemvT sets y[l] = fma(v[m-1], a[m-1][l], ... fma(v[0], a[0][l], 0))
// for l < n: y = a^T v (a m x n), summed down the rows in order.
func gemvT(y, a []float64, lda, m, n int, v []float64) {
	kernelCheck(len(a), lda, m, n, len(y) < n || len(v) < m)
	gemvTGo(y, a, lda, m, n, v, eigenGemvTFast(y, a, lda, m, n, v))
}

// gemvTGo is the portable gemvT of the columns from l0 on.
func gemvTGo(y, a []float64, lda, m, n int, v []float64, l0 int) {
	for l := l0; l < n; l++ {
		var acc float64
		for i, vi := range v[:m] {
			acc = math.FMA(vi, a[i*lda+l], acc)
		}
		y[l] = acc
	}
}

// rot applies the plane rotation (c, s) to the rows x and y (of x's
// length, y at least as long): x, y = c x - s y, s x + c y, each product
// rounded on its own.
func rot(x, y []float64, c, s float64) {
	y = y[:len(x)]
	if !eigenRotFast(x, y, c, s) {
		rotGo(x, y, c, s)
	}
}

// rotGo is the portable rotation of x and y by (c, s).
func rotGo(x, y []float64, c, s float64) {
	y = y[:len(x)]
	for k := range x {
		xk, yk := x[k], y[k]
		x[k] = float64(c*xk) - float64(s*yk)
		y[k] = float64(s*xk) + float64(c*yk)
	}
}

func kernelCheck(la, lda, m, n int, short bool) {
	if m < 0 || n < 0 || lda < n || short || (m > 0 && la < (m-1)*lda+n) {
		panic(fmt.Sprintf("reconstruct: row kernel %dx%d with |a|=%d/%d", m, n, la, lda))
	}
}

// syr sets a[i][l] = fma(-x[i], x[l], a[i][l]) for i <= l < m: the upper
// triangle of a (m x m) loses x x^T.
func syr(a []float64, lda, m int, x []float64) {
	kernelCheck(len(a), lda, m, m, len(x) < m)
	if !eigenSyrFast(a, lda, m, x) {
		syrGo(a, lda, m, x)
	}
}

func syrGo(a []float64, lda, m int, x []float64) {
	for i := 0; i < m; i++ {
		row, xi := a[i*lda+i:i*lda+m], -x[i]
		for l, xl := range x[i:m] {
			row[l] = math.FMA(xi, xl, row[l])
		}
	}
}

// dotRow is the float64 dot product of a and b[:len(a)], with four
// partial sums so that the loop is not one chain of dependent adds.
func dotRow(a, b []float64) float64 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float64
	l := 0
	for ; l+3 < len(a); l += 4 {
		s0 += a[l] * b[l]
		s1 += a[l+1] * b[l+1]
		s2 += a[l+2] * b[l+2]
		s3 += a[l+3] * b[l+3]
	}
	for ; l < len(a); l++ {
		s0 += a[l] * b[l]
	}
	return (s0 + s2) + (s1 + s3)
}
