package reconstruct

import (
	"math"
	"slices"
)

// eigenMaxIter bounds the implicit QL iterations spent on one eigenvalue;
// LAPACK's dsteqr allows 30 per eigenvalue in all.
const eigenMaxIter = 30

// eigenWork holds the scratch of sym so that the SVDs of an ingest
// allocate it once.
type eigenWork struct {
	d, e, tau, tmp []float64
	vt             []float64 // n x n: Q^T, then the eigenvectors as rows
	// Scratch of byTwisted: eigenvalues, squared off-diagonal (a copy for
	// rootFreeQL and one kept), the pivots of twisted factorisations, the
	// vectors side by side and one at a time, the refined eigenvalues.
	lam, e2, esq, dp, dm, ip, im, x, z, rq []float64
	// fast reports whether the last decomposition took the fast path.
	fast bool
}

// sym computes the eigen-decomposition of the symmetric n x n matrix a
// (row-major, both triangles set; overwritten): its eigenvalues in
// decreasing order into vals[:n], and the unit eigenvectors of the first r
// of them into vecs, one per row (r x n, row-major). It reports false if
// the QL iteration did not converge (at most eigenMaxIter iterations per
// eigenvalue), which does not happen on finite input in practice.
//
// It starts with a Householder reduction to tridiagonal form
// T = Q^T A Q in float64 (Golub and Van Loan, 8.3; LAPACK's dsytd2). The
// matrix is first scaled by a power of two so that its largest diagonal
// element is near 1: sums of squares inside then neither overflow nor
// underflow, and the scaling is exact. Then:
//
//   - The fast path (byTwisted): the eigenvalues of T by the root-free QL
//     iteration, each wanted eigenvector of T by a twisted factorisation,
//     and the reflectors of Q applied to those vectors. It is taken when
//     every wanted vector is provably within fastAngleTol (2^-30) of an
//     exact eigenvector of T, by its residual and its gap to the other
//     eigenvalues: the vectors are then orthonormal to about 2^-29.
//   - Otherwise (clusters, repeated or zero eigenvalues, splits) the
//     textbook method (LAPACK's dorg2l and dsteqr): Q formed explicitly,
//     then implicit QL with Wilkinson shifts on T, every rotation applied
//     to Q as well so that its columns become the eigenvectors. The
//     eigenvectors are then orthonormal to about n 2^-53 whatever the
//     spacing of the eigenvalues.
//
// Either way the first r eigenvalues are exact for a matrix within about
// n 2^-53 ||A|| of a (the fast path refines them to the Rayleigh quotients
// of their vectors), and the QL iteration's others too; the fast path's
// others, which only bound gaps, are within about 2^-29 ||A||
// (fastDeflateTol). Each eigenvector is accurate to about
// 2^-53 ||A|| / gap on either path.
func (w *eigenWork) sym(a []float64, n int, vals, vecs []float64, r int) bool {
	return w.decompose(a, n, vals, vecs, r, true)
}

// decompose is sym, with the fast path tried only when fast is set.
func (w *eigenWork) decompose(a []float64, n int, vals, vecs []float64, r int, fast bool) bool {
	if n == 0 {
		return true
	}
	var big float64
	for i := 0; i < n; i++ {
		big = max(big, math.Abs(a[i*n+i]))
	}
	if big == 0 {
		for i := range a[:n*n] {
			big = max(big, math.Abs(a[i]))
		}
	}
	scale := 1.0
	if big > 0 && !math.IsInf(big, 0) {
		_, exp := math.Frexp(big)
		scale = math.Ldexp(1, -exp)
		if math.IsInf(scale, 0) {
			scale = 1 // big is subnormal: leave a as it is
		}
		for i := range a[:n*n] {
			a[i] *= scale
		}
	}
	w.d, w.e, w.tau, w.tmp = svdGrow64(&w.d, n), svdGrow64(&w.e, n), svdGrow64(&w.tau, n), svdGrow64(&w.tmp, n)
	w.vt = svdGrow64(&w.vt, n*n)
	w.tridiagonalize(a, n)
	if w.fast = fast && w.byTwisted(a, n, vals, vecs, r, scale); w.fast {
		return true
	}
	w.formQt(a, n)
	w.orient(n)
	if !w.ql(n) {
		return false
	}
	// Selection sort into decreasing order: n is small, and only the
	// first r vectors are copied out.
	d := w.d
	for i := 0; i < n; i++ {
		best := i
		for j := i + 1; j < n; j++ {
			if d[j] > d[best] {
				best = j
			}
		}
		if best != i {
			d[i], d[best] = d[best], d[i]
			if i < r {
				ri, rb := w.vt[i*n:(i+1)*n], w.vt[best*n:(best+1)*n]
				for p := range ri {
					ri[p], rb[p] = rb[p], ri[p]
				}
			}
		}
		vals[i] = d[i] / scale
	}
	copy(vecs[:r*n], w.vt[:r*n])
	return true
}

// tridiagonalize reduces a (n x n, full storage) to T = Q^T A Q with
// Q = H_0 H_1 ... H_{n-3}, H_j = I - tau_j v_j v_j^T: d and e get the
// diagonal and the sub-diagonal of T, row j of a the vector v_j (v_j[j+1]
// = 1 implied, v_j[j+2:] in a[j][j+2:]). Row j holds column j below the
// diagonal by symmetry, so every access is along a row; the trailing block
// is updated in both triangles for the same reason.
func (w *eigenWork) tridiagonalize(a []float64, n int) {
	d, e, tau := w.d, w.e, w.tau
	p := w.tmp[:n]
	for j := 0; j < n-2; j++ {
		d[j] = a[j*n+j]
		x := a[j*n+j+1 : (j+1)*n]
		alpha := x[0]
		xnorm := math.Sqrt(dotRow(x[1:], x[1:]))
		if xnorm == 0 {
			tau[j], e[j] = 0, alpha
			continue
		}
		beta := -math.Copysign(math.Sqrt(alpha*alpha+xnorm*xnorm), alpha)
		t := (beta - alpha) / beta
		inv := 1 / (alpha - beta)
		for i := 1; i < len(x); i++ {
			x[i] *= inv
		}
		x[0] = 1
		tau[j], e[j] = t, beta
		// p = tau A22 v, w = p - (tau/2)(p.v) v, A22 -= v w^T + w v^T.
		m := n - j - 1
		a22 := a[(j+1)*n+j+1:]
		pv := p[:m]
		gemv(pv, a22, n, m, m, x)
		for i := range pv {
			pv[i] *= t
		}
		half := 0.5 * t * dotRow(pv, x)
		for i := range pv {
			pv[i] -= half * x[i]
		}
		ger2(a22, n, m, m, x, pv, pv, x)
	}
	if n >= 2 {
		d[n-2] = a[(n-2)*n+n-2]
		e[n-2] = a[(n-2)*n+n-1]
	}
	d[n-1] = a[n*n-1]
	e[n-1] = 0
}

// formQt sets w.vt to Q^T = H_{n-3} ... H_1 H_0, built from the right:
// starting from the identity, each H_j (j from n-3 down to 0) multiplies
// the rows j+1 .. n-1, the only ones it changes, along their columns
// j+1 .. n-1.
func (w *eigenWork) formQt(a []float64, n int) {
	vt := w.vt[:n*n]
	clear(vt)
	for i := 0; i < n; i++ {
		vt[i*n+i] = 1
	}
	sv := w.tmp[:n]
	for j := n - 3; j >= 0; j-- {
		t := w.tau[j]
		if t == 0 {
			continue
		}
		m := n - j - 1
		v := a[j*n+j+1 : (j+1)*n]
		block := vt[(j+1)*n+j+1:]
		gemv(sv, block, n, m, m, v)
		for i := range sv[:m] {
			sv[i] *= t
		}
		ger(block, n, m, m, sv, v)
	}
}

// orient reverses the order of T's coordinates (d, e and the rows of Q^T)
// when its last diagonal element is the smaller in magnitude, as LAPACK's
// dsteqr turns QL into QR: QL deflates at the top, and starting from the
// small end of a graded T (the Gram matrices here have their large
// eigenvalues first) saves a quarter of the iterations. With J the
// reversal, A = (Q J) (J T J) (Q J)^T, so the eigenvectors are unchanged.
func (w *eigenWork) orient(n int) {
	d, e := w.d[:n], w.e[:n-1]
	if n < 2 || !(math.Abs(d[n-1]) < math.Abs(d[0])) {
		return
	}
	slices.Reverse(d)
	slices.Reverse(e)
	for i, j := 0, n-1; i < j; i, j = i+1, j-1 {
		ri, rj := w.vt[i*n:(i+1)*n], w.vt[j*n:(j+1)*n]
		for p := range ri {
			ri[p], rj[p] = rj[p], ri[p]
		}
	}
}

// ql diagonalises the tridiagonal (d, e) by implicit QL with Wilkinson
// shifts (tqli of Numerical Recipes, the QL half of LAPACK's dsteqr),
// rotating the rows of w.vt along. e[i] couples d[i] and d[i+1].
//
// e[m] is dropped when it is at most 2^-53 of its neighbours on the
// diagonal (LAPACK's test), or at most 2^-53 of T's largest element
// (tridiagMax), at most 2^-53 ||T||: either moves no eigenvalue by more
// than the n 2^-53 ||A|| that sym promises. The relative test alone
// never ends on a block of zero eigenvalues such as the Gram matrix of a
// span that ends in a run of one row has (at layer 0 a value row is a
// function of its token alone, and indentation repeats a token): every
// sweep scales that block's diagonal and off-diagonal down together, by
// about the unit roundoff, so that neither becomes small against the
// other before the iteration gives up.
func (w *eigenWork) ql(n int) bool {
	d, e := w.d[:n], w.e[:n]
	floor := 0x1p-53 * tridiagMax(d, e[:max(n-1, 0)])
	for l := 0; l < n; l++ {
		for iter := 0; ; iter++ {
			m := l
			for ; m < n-1; m++ {
				if a := math.Abs(e[m]); a <= floor || a <= 0x1p-53*(math.Abs(d[m])+math.Abs(d[m+1])) {
					break
				}
			}
			if m == l {
				break
			}
			if iter == eigenMaxIter {
				return false
			}
			g := (d[l+1] - d[l]) / (2 * e[l])
			r := math.Sqrt(g*g + 1)
			g = d[m] - d[l] + e[l]/(g+math.Copysign(r, g))
			s, c, p := 1.0, 1.0, 0.0
			i := m - 1
			for ; i >= l; i-- {
				f, b := s*e[i], c*e[i]
				r = math.Sqrt(f*f + g*g)
				e[i+1] = r
				if r == 0 {
					d[i+1] -= p
					e[m] = 0
					break
				}
				s, c = f/r, g/r
				g = d[i+1] - p
				r = (d[i]-g)*s + 2*c*b
				p = s * r
				d[i+1] = g + p
				g = c*r - b
				// Rotating the vectors here, not after the sweep, lets the
				// processor do it while the next step waits on its divisions.
				rot(w.vt[i*n:(i+1)*n], w.vt[(i+1)*n:(i+2)*n], c, s)
			}
			if r == 0 && i >= l {
				continue
			}
			d[l] -= p
			e[l] = g
			e[m] = 0
		}
	}
	return true
}

// tridiagMax is the largest magnitude among d and e, the diagonal and
// off-diagonal of a symmetric tridiagonal T: at most ||T||_2, and at
// least a third of it.
func tridiagMax(d, e []float64) float64 {
	var big float64
	for _, v := range d {
		big = max(big, math.Abs(v))
	}
	for _, v := range e {
		big = max(big, math.Abs(v))
	}
	return big
}
