package reconstruct

import (
	"math"

	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/lapack/lapack64"
)

// Pivot bounds of the CholeskyQR passes (see orthonormalizeRows32): the
// first pass gives up when a pivot of the Cholesky factor is below
// cholFirstTol times the largest row norm (the rows are then too close to
// dependent for a float32 product with the inverse factor), the second when
// its input is not close to orthonormal. cholRefineTol bounds
// ||m m^T - I||_F for refineRows32.
const (
	cholFirstTol  = 0x1p-12
	cholSecondTol = 0.5
	cholRefineTol = 0x1p-12
)

// qrWork holds the scratch of orthonormalizeRows so that a randomized SVD,
// which orthonormalizes several times, allocates it once.
type qrWork struct {
	tau, work []float64
	f64       []float64    // float64 copy for orthonormalizeRows32
	gram      []float64    // k x k Gram matrix, then its Cholesky factor R
	lt        []float64    // R^T (solveRows)
	sums      [4][]float64 // a block's coefficients in float64 (solveRows)
	inv, tmp  []float32    // a lower triangular factor (or a block of one); the product with it
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
//
// The second pass is refineRows32 when the first left the rows orthonormal
// to within cholRefineTol, as it does unless kappa(m) nears 2^12: the
// same correction to first order, without a Cholesky factor or inverse.
func (w *qrWork) orthonormalizeRows32(m []float32, k, n int, once bool) {
	if !w.cholRows32(m, k, n, cholFirstTol) {
		w.householderRows32(m, k, n)
	} else if !once {
		w.secondPass32(m, k, n)
	}
}

// secondPass32 is the second pass of orthonormalizeRows32 over rows that
// have had the first: refineRows32, else cholRows32, else Householder.
func (w *qrWork) secondPass32(m []float32, k, n int) {
	if !w.refineRows32(m, k, n) && !w.cholRows32(m, k, n, cholSecondTol) {
		w.householderRows32(m, k, n)
	}
}

// refineRows32 is the second CholeskyQR pass over rows m (k x n) that are
// already nearly orthonormal, to first order. With G = m m^T = I + E
// (gramUpperF32, exact products summed in float64), the Cholesky factor
// is R = I + U + O(E^2), U the upper triangle of E with half its
// diagonal, so R^-T = I - U^T + O(E^2), and m = (I - U^T) m gives rows
// whose Gram matrix is I - U^T - U + E + O(E^2) = I + O(E^2). It reports
// false, leaving m as it was, unless ||E||_F <= cholRefineTol: then the
// neglected terms are at most 2^-24, the float32 level, and the product
// with the lower triangular I - U^T, in float32 as in cholRows32, adds
// rounding of about 2^-24 sqrt(k), as the full pass would.
func (w *qrWork) refineRows32(m []float32, k, n int) bool {
	if cap(w.gram) < 2*k*k {
		w.gram = make([]float64, 2*k*k)
	}
	g := w.gram[:k*k]
	gramUpperF32(g, m, k, n)
	var ef float64
	for i := 0; i < k; i++ {
		d := g[i*k+i] - 1
		ef += d * d
		for _, v := range g[i*k+i+1 : (i+1)*k] {
			ef += 2 * v * v
		}
	}
	if !(ef <= cholRefineTol*cholRefineTol) {
		return false
	}
	if cap(w.inv) < k*k {
		w.inv = make([]float32, k*k)
	}
	x := w.inv[:k*k]
	clear(x)
	for i := 0; i < k; i++ {
		x[i*k+i] = float32(1 - (g[i*k+i]-1)/2)
		for j := i + 1; j < k; j++ {
			x[j*k+i] = float32(-g[i*k+j])
		}
	}
	w.lowerTimes(m, x, k, n)
	return true
}

// lowerTimes replaces m (k x n) by x m, x lower triangular (k x k) in
// float32: row block i..i+3 of x needs the columns < i+4 only.
func (w *qrWork) lowerTimes(m, x []float32, k, n int) {
	if cap(w.tmp) < k*n {
		w.tmp = make([]float32, k*n)
	}
	out := w.tmp[:k*n]
	for i := 0; i < k; i += 4 {
		rb := min(4, k-i)
		matmulF32(out[i*n:], n, x[i*k:], k, m, n, rb, n, i+rb)
	}
	copy(m, out)
}

// cholRows32 is one CholeskyQR pass over the rows of m (k x n): it reports
// false, leaving m as it was, when a pivot squared is at most tol^2 times
// the largest diagonal element of the Gram matrix. The Gram matrix is
// gramUpperF32 (exact products, float64 sums); the Cholesky factor R
// (m m^T = R^T R) is float64, by the row kernels of eigen_kernels.go; the
// solve R^T q = m (solveRows) is float32.
func (w *qrWork) cholRows32(m []float32, k, n int, tol float64) bool {
	if cap(w.gram) < 2*k*k {
		w.gram = make([]float64, 2*k*k)
	}
	g := w.gram[:k*k]
	gramUpperF32(g, m, k, n)
	var big float64
	for i := 0; i < k; i++ {
		big = max(big, g[i*k+i])
	}
	if !cholUpper(g, k, tol*tol*big) {
		return false
	}
	w.solveRows(m, g, k, n)
	return true
}

// solveRows replaces m (k x n, float32) by R^-T m, R upper triangular (the
// upper triangle of the float64 k x k r), by block forward substitution
// four rows at a time. With L = R^T, the block of rows i..i+3 is
// q_b = L_bb^-1 (m_b - L_b,<i q_<i): one matmulF32 of the rows m[:i+4],
// solved already above i, with the coefficients [-L_bb^-1 L_b,<i | L_bb^-1]
// worked out in float64 (the off-diagonal block with gemvT on a copy of
// R^T, rows contiguous) and rounded to float32 once. It is block forward
// substitution with the 4 x 4 diagonal blocks inverted in float64, as
// accurate as the product with a float32 R^-T that this code made before,
// without the k^3/6 operations of forming that inverse.
func (w *qrWork) solveRows(m []float32, r []float64, k, n int) {
	if cap(w.tmp) < 4*n {
		w.tmp = make([]float32, 4*n)
	}
	if cap(w.inv) < 4*k {
		w.inv = make([]float32, 4*k)
	}
	// lt = L = R^T, rows contiguous (lower triangle).
	lt := svdGrow64(&w.lt, k*k)
	for j := 0; j < k; j++ {
		for u, v := range r[j*k+j : (j+1)*k] {
			lt[(j+u)*k+j] = v
		}
	}
	out := w.tmp[:4*n]
	var sum [4][]float64
	for t := range sum {
		sum[t] = svdGrow64(&w.sums[t], k)
	}
	for i := 0; i < k; i += 4 {
		rb := min(4, k-i)
		// li = L_bb^-1, lower triangular: li[t] L_bb = e_t, solved from
		// the right.
		var li [4][4]float64
		for t := 0; t < rb; t++ {
			li[t][t] = 1 / lt[(i+t)*k+i+t]
			for u := t - 1; u >= 0; u-- {
				var acc float64
				for s := u + 1; s <= t; s++ {
					acc += li[t][s] * lt[(i+s)*k+i+u]
				}
				li[t][u] = -acc / lt[(i+u)*k+i+u]
			}
		}
		c := w.inv[:rb*(i+rb)]
		for t := 0; t < rb; t++ {
			row := c[t*(i+rb) : (t+1)*(i+rb)]
			if i > 0 {
				// (L_bb^-1 L_b,<i)[t] = li[t][:t+1] times rows i..i+t of
				// L, their first i columns.
				gemvT(sum[t], lt[i*k:], k, t+1, i, li[t][:t+1])
				for j, v := range sum[t][:i] {
					row[j] = float32(-v)
				}
			}
			for u := 0; u < rb; u++ {
				row[i+u] = float32(li[t][u])
			}
		}
		matmulF32(out, n, c, i+rb, m, n, rb, n, i+rb)
		copy(m[i*n:(i+rb)*n], out[:rb*n])
	}
}

// cholUpper overwrites the upper triangle of the symmetric k x k matrix g
// (row-major, upper triangle set) with its Cholesky factor R, g = R^T R,
// right-looking: row j of R is the current row j scaled by 1/sqrt(pivot),
// then the upper triangle of the trailing block loses its outer product
// (syr), every access along a row. It reports false when a pivot (before
// its square root) is not above floor. The lower triangle is not read.
func cholUpper(g []float64, k int, floor float64) bool {
	for j := 0; j < k; j++ {
		piv := g[j*k+j]
		if !(piv > floor) {
			return false
		}
		r := math.Sqrt(piv)
		g[j*k+j] = r
		row := g[j*k+j+1 : (j+1)*k]
		inv := 1 / r
		for l := range row {
			row[l] *= inv
		}
		if j+1 < k {
			syr(g[(j+1)*k+j+1:], k, k-j-1, row)
		}
	}
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
