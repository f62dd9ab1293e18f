package reconstruct

import (
	"math"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/lapack/lapack64"
)

// Pivot bounds of the CholeskyQR passes (see orthonormalizeRows32): the
// first pass gives up when a pivot of the Cholesky factor is below
// cholFirstTol times the largest row norm (the rows are then too close to
// dependent for a float32 product with the inverse factor), the second when
// its input is not close to orthonormal.
const (
	cholFirstTol  = 0x1p-12
	cholSecondTol = 0.5
)

// qrWork holds the scratch of orthonormalizeRows so that a randomized SVD,
// which orthonormalizes several times, allocates it once.
type qrWork struct {
	tau, work []float64
	f64       []float64 // float64 copy for orthonormalizeRows32
	gram      []float64 // k x k Gram matrix, then its Cholesky factor
	inv, tmp  []float32 // inverse Cholesky factor; the product with it
}

// orthonormalizeRows replaces the rows of m (Rows <= Cols) by an
// orthonormal basis of their span: the Q of a Householder LQ factorisation
// m = L Q (LAPACK dgelqf then dorglq, gonum's blocked Go port), in float64.
// It is the QR of m^T, done on rows because rows are contiguous here.
// Householder factorisations are backward stable: Q is orthonormal to
// machine precision however ill-conditioned or rank-deficient m is (a row
// that depends on the earlier ones gets a new orthonormal direction), which
// Gram-Schmidt does not guarantee.
func (w *qrWork) orthonormalizeRows(m blas64.General) {
	k := m.Rows
	if cap(w.tau) < k {
		w.tau = make([]float64, k)
	}
	tau := w.tau[:k]
	var q [1]float64
	lapack64.Gelqf(m, tau, q[:], -1)
	need := int(q[0])
	lapack64.Orglq(m, tau, q[:], -1)
	need = max(need, int(q[0]), 1)
	if cap(w.work) < need {
		w.work = make([]float64, need)
	}
	work := w.work[:need]
	lapack64.Gelqf(m, tau, work, need)
	lapack64.Orglq(m, tau, work, need)
}

// orthonormalizeRows32 replaces the rows of the k x n float32 matrix m by
// an orthonormal basis of their span. It is CholeskyQR2 (Fukaya et al.,
// 2014): twice, the Gram matrix m m^T = R^T R in float64 (the float32
// products are exact there), its Cholesky factor R, and m = R^-T m, the
// k x k by k x n product in float32 with the AVX2 kernel. The first pass
// leaves m orthonormal to about 2^-24 kappa(m) and the second to about
// 2^-24 sqrt(k), the float32 level. When the rows are too close to
// dependent for that (a pivot below 2^-12 of the largest row norm, so
// kappa(m) >= 2^12, or the second pass does not see a nearly orthonormal
// input), it falls back to orthonormalizeRows, Householder in float64,
// which is stable whatever the rank.
//
// With once set, only the first pass is made: the rows come out a basis of
// the same span orthonormal to about 2^-24 kappa(m) <= 2^-12, enough for
// the intermediate bases of a power iteration, whose only need is that the
// next product does not lose the weaker directions.
func (w *qrWork) orthonormalizeRows32(m []float32, k, n int, once bool) {
	if w.cholRows32(m, k, n, cholFirstTol) && (once || w.cholRows32(m, k, n, cholSecondTol)) {
		return
	}
	w.householderRows32(m, k, n)
}

// cholRows32 is one CholeskyQR pass over the rows of m (k x n): it reports
// false, leaving m as it was, when a pivot squared is at most tol^2 times
// the largest diagonal element of the Gram matrix.
func (w *qrWork) cholRows32(m []float32, k, n int, tol float64) bool {
	if cap(w.f64) < k*n {
		w.f64 = make([]float64, k*n)
	}
	d := w.f64[:k*n]
	for i, v := range m[:k*n] {
		d[i] = float64(v)
	}
	if cap(w.gram) < k*k {
		w.gram = make([]float64, k*k)
	}
	g := w.gram[:k*k]
	blas64.Syrk(blas.NoTrans, 1, blas64.General{Rows: k, Cols: n, Stride: n, Data: d}, 0,
		blas64.Symmetric{N: k, Stride: k, Uplo: blas.Upper, Data: g})
	var big float64
	for i := 0; i < k; i++ {
		big = max(big, g[i*k+i])
	}
	floor := tol * tol * big
	// Upper Cholesky in place: G = R^T R, row j of R from row j of G.
	for j := 0; j < k; j++ {
		s := g[j*k+j]
		for p := 0; p < j; p++ {
			s -= g[p*k+j] * g[p*k+j]
		}
		if !(s > floor) {
			return false
		}
		r := math.Sqrt(s)
		g[j*k+j] = r
		for i := j + 1; i < k; i++ {
			t := g[j*k+i]
			for p := 0; p < j; p++ {
				t -= g[p*k+j] * g[p*k+i]
			}
			g[j*k+i] = t / r
		}
	}
	// X = R^-T, lower triangular: R^T X = I, column by column.
	if cap(w.inv) < k*k {
		w.inv = make([]float32, k*k)
	}
	x := w.inv[:k*k]
	clear(x)
	if cap(w.work) < k {
		w.work = make([]float64, k)
	}
	col := w.work[:k]
	for c := 0; c < k; c++ {
		col[c] = 1 / g[c*k+c]
		x[c*k+c] = float32(col[c])
		for i := c + 1; i < k; i++ {
			var t float64
			for p := c; p < i; p++ {
				t += g[p*k+i] * col[p]
			}
			col[i] = -t / g[i*k+i]
			x[i*k+c] = float32(col[i])
		}
	}
	if cap(w.tmp) < k*n {
		w.tmp = make([]float32, k*n)
	}
	out := w.tmp[:k*n]
	matmulF32(out, n, x, k, m, n, k, n, k)
	copy(m, out)
	return true
}

// householderRows32 is orthonormalizeRows of the k x n float32 matrix m,
// done in float64 and rounded back.
func (w *qrWork) householderRows32(m []float32, k, n int) {
	if cap(w.f64) < k*n {
		w.f64 = make([]float64, k*n)
	}
	d := w.f64[:k*n]
	for i, v := range m[:k*n] {
		d[i] = float64(v)
	}
	w.orthonormalizeRows(blas64.General{Rows: k, Cols: n, Stride: n, Data: d})
	for i, v := range d {
		m[i] = float32(v)
	}
}
