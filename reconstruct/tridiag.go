package reconstruct

import (
	"math"
	"slices"
)

// The fast path of eigenWork.sym: all eigenvalues of the tridiagonal T by
// the root-free QL iteration, then each wanted eigenvector of T alone by a
// twisted factorisation, then the Householder reflectors applied to those
// vectors only. Where the QL iteration of eigenWork.ql takes a square root
// and two divisions per rotation, one dependent on the next, and rotates
// every vector along, this takes one division per step for the values and
// an independent O(n) solve per vector, about twice as fast on the 40 x 40
// Gram matrices of a rank-32 SVD. Its vectors are as accurate as the
// residual over the gap allows, so it checks both and gives way to the QL
// iteration, which is accurate whatever the gaps, when a vector could be
// off by more than fastAngleTol.

// fastAngleTol bounds the angle between a vector of the fast path and the
// exact eigenvector of T (by the residual over the gap, Davis and Kahan):
// vectors from it are orthonormal to about twice that. 2^-30 is far below
// the float32 factors made from them.
const fastAngleTol = 0x1p-30

// fastDeflateTol is the deflation bound of the fast path's root-free QL
// iteration, relative to the neighbouring diagonal (see rootFreeQL):
// looser than the QL iteration's 2^-53, which saves a fifth of its
// sweeps. Dropping an off-diagonal element that small moves an
// eigenvalue by at most that much (about e^2 / gap where the gap is
// wide), which the wanted ones do not keep: each is refined to the
// Rayleigh quotient of its vector, and the vector is checked against the
// matrix as it is. The others, which only bound gaps here, are accurate
// to about 2^-29 ||A||.
const fastDeflateTol = 0x1p-30

// byTwisted tries the fast path on the tridiagonal (w.d, w.e) that
// tridiagonalize left, with its reflectors in a: eigenvalues in decreasing
// order into vals (scaled back by 1/scale), the first r eigenvectors as
// rows of vecs. It reports false, having changed neither w.d, w.e nor a,
// when the QL iteration must do it instead: a gap too small for the
// residual, a zero pivot, a non-finite value, or no convergence.
func (w *eigenWork) byTwisted(a []float64, n int, vals, vecs []float64, r int, scale float64) bool {
	lam, e2, esq := svdGrow64(&w.lam, n), svdGrow64(&w.e2, n), svdGrow64(&w.esq, n)
	copy(lam, w.d[:n])
	for i := 0; i < n-1; i++ {
		esq[i] = w.e[i] * w.e[i]
	}
	esq[n-1] = 0
	copy(e2, esq)
	// QL deflates at the top: start from the small end (see orient).
	if n > 1 && math.Abs(lam[n-1]) < math.Abs(lam[0]) {
		slices.Reverse(lam)
		slices.Reverse(e2[:n-1])
	}
	if !rootFreeQL(lam, e2, fastDeflateTol) {
		return false
	}
	slices.SortFunc(lam, func(x, y float64) int {
		switch {
		case x > y:
			return -1
		case x < y:
			return 1
		}
		return 0
	})
	var norm float64
	for _, v := range lam {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return false
		}
		norm = max(norm, math.Abs(v))
	}
	if norm == 0 {
		return false // T = 0: any vector is an eigenvector; QL picks them
	}
	// The gaps as the eigenvalues' own error may have widened them.
	slack := 4 * fastDeflateTol * norm
	// The vectors go into x (n x r) as columns, each row of x then r long
	// for backTransform; z holds one vector at a time.
	x, z, rqs := svdGrow64(&w.x, n*r), svdGrow64(&w.z, n), svdGrow64(&w.rq, r)
	var shifts [8]float64
	for i0 := 0; i0 < r; i0 += 8 {
		for q := range shifts {
			shifts[q] = lam[min(i0+q, r-1)] // past r: the last again
		}
		if !w.pivots(&shifts, n) {
			return false
		}
		for q := 0; q < 8 && i0+q < r; q++ {
			i := i0 + q
			gap := math.Inf(1)
			if i > 0 {
				gap = lam[i-1] - lam[i]
			}
			if i+1 < n {
				gap = min(gap, lam[i]-lam[i+1])
			}
			gap -= slack
			res, rq, ok := w.twisted(z, lam[i], n, q)
			// sin(angle) <= res / (gap - res), the gap shrunk by the
			// eigenvalues' own error, which res bounds too.
			if !ok || !(res <= fastAngleTol*(gap-2*res)) {
				return false
			}
			rqs[i] = rq
			for t, v := range z {
				x[t*r+i] = v
			}
		}
	}
	// The refined values only now: the gaps above are the unrefined ones'.
	copy(lam, rqs)
	w.backTransform(a, n, x, r)
	for q := 0; q < r; q++ {
		row := vecs[q*n : (q+1)*n]
		for t := range row {
			row[t] = x[t*r+q]
		}
	}
	for i := 0; i < n; i++ {
		vals[i] = lam[i] / scale
	}
	return true
}

// rootFreeQL overwrites d with the eigenvalues (in no order) of the
// tridiagonal with diagonal d and squared off-diagonal e2 (e2[i] couples
// d[i] and d[i+1]; e2 is destroyed): the Pal-Walker-Kahan variant of
// implicit QL with Wilkinson shifts (LAPACK's dsterf, its QL half), which
// works on the squares of the off-diagonal and needs no square root in
// its inner loop. It deflates where e[m] <= tol (|d[m]| + |d[m+1]|) or
// e[m] <= tol max(|d|, |e|) <= tol ||T|| (tol 2^-53 is eigenWork.ql's
// bound; see there why the second test is needed) and solves a trailing
// 2 x 2 block directly. It reports false after eigenMaxIter iterations
// on one eigenvalue.
func rootFreeQL(d, e2 []float64, tol float64) bool {
	n := len(d)
	var big, e2Big float64
	for _, v := range d {
		big = max(big, math.Abs(v))
	}
	for _, v := range e2[:max(n-1, 0)] {
		e2Big = max(e2Big, v)
	}
	// (tol times T's largest element)^2, as in eigenWork.ql.
	floor := tol * tol * max(big*big, e2Big)
	l := 0
	for iter := 0; l < n; {
		m := l
		for ; m < n-1; m++ {
			t := math.Abs(d[m]) + math.Abs(d[m+1])
			if e2[m] <= floor || e2[m] <= tol*tol*t*t {
				break
			}
		}
		if m < n-1 {
			e2[m] = 0
		}
		switch {
		case m == l:
			l, iter = l+1, 0
			continue
		case m == l+1:
			d[l], d[l+1] = sym2x2(d[l], math.Sqrt(e2[l]), d[l+1])
			e2[l] = 0
			l, iter = l+2, 0
			continue
		case iter == eigenMaxIter:
			return false
		}
		iter++
		p := d[l]
		rte := math.Sqrt(e2[l])
		sigma := (d[l+1] - p) / (2 * rte)
		sigma = p - rte/(sigma+math.Copysign(math.Hypot(sigma, 1), sigma))
		rootFreeSweep(d, e2, l, m, sigma)
	}
	return true
}

// rootFreeSweep is one root-free QL sweep with shift sigma over rows
// m down to l: dsterf's inner loop, with c (cos^2) = 1/tp and s (sin^2)
// = t/tp for tan^2 t, so that gamma = c (alpha - sigma) - s oldgam = g/tp,
// p = gamma^2 / c = g^2/tp and the next t = bb / p = bb tp / g^2. Its two
// dependent divisions a step (c = p/r, then p = gamma^2/c) become one on
// the chain (t) and one beside it (1/tp). Where p is exactly zero, dsterf
// takes a special case that this form cannot hold (gamma may be zero with
// p not), and the rest of the sweep is dsterf's own loop.
func rootFreeSweep(d, e2 []float64, l, m int, sigma float64) {
	g := d[m] - sigma
	tp, inv, s, gamma := 1.0, 1.0, 0.0, g
	for i := m - 1; i >= l; i-- {
		bb, gg := e2[i], g*g
		if gg == 0 {
			s, p, gamma := dsterfSweep(d, e2, i, l, m, sigma, inv, s, gamma, 0)
			e2[l] = s * p
			d[l] = sigma + gamma
			return
		}
		t := bb * tp / gg
		if i != m-1 {
			e2[i+1] = s * (gg*inv + bb) // s (p + bb)
		}
		alpha := d[i]
		g = (alpha - sigma) - t*gamma
		tp = 1 + t
		inv = 1 / tp
		s = t * inv
		next := g * inv
		d[i+1] = gamma + (alpha - next)
		gamma = next
	}
	e2[l] = s * (g * g * inv)
	d[l] = sigma + gamma
}

// dsterfSweep is dsterf's inner loop over rows i down to l (of a sweep
// that started at m) from the state c, s, gamma, p; it returns the final
// s, p and gamma.
func dsterfSweep(d, e2 []float64, i0, l, m int, sigma, c, s, gamma, p float64) (float64, float64, float64) {
	for i := i0; i >= l; i-- {
		bb := e2[i]
		r := p + bb
		if i != m-1 {
			e2[i+1] = s * r
		}
		oldc := c
		c, s = p/r, bb/r
		oldgam := gamma
		alpha := d[i]
		gamma = c*(alpha-sigma) - s*oldgam
		d[i+1] = oldgam + (alpha - gamma)
		if c != 0 {
			p = gamma * gamma / c
		} else {
			p = oldc * bb
		}
	}
	return s, p, gamma
}

// sym2x2 returns the eigenvalues of [[a, b], [b, c]], the larger in
// magnitude first (LAPACK's dlae2): the smaller comes from the
// determinant, so that it does not cancel.
func sym2x2(a, b, c float64) (float64, float64) {
	sm, df := a+c, a-c
	acmx, acmn := a, c
	if math.Abs(c) > math.Abs(a) {
		acmx, acmn = c, a
	}
	rt := math.Hypot(df, 2*b)
	var rt1 float64
	switch {
	case sm < 0:
		rt1 = 0.5 * (sm - rt)
	case sm > 0:
		rt1 = 0.5 * (sm + rt)
	default:
		return 0.5 * rt, -0.5 * rt
	}
	return rt1, (acmx/rt1)*acmn - (b/rt1)*b
}

// pivots sets w.dp and w.dm to the pivots of T - lam I from the top
// (L+ D+ L+^T: dp[i] = d[i] - lam - e[i-1]^2 / dp[i-1]) and from the
// bottom (U- D- U-^T: dm[i] = d[i] - lam - e[i]^2 / dm[i+1]), and w.ip and
// w.im to their reciprocals, for eight shifts at once, side by side:
// element i*8+q for lam[q]. The sixteen recurrences are independent
// chains of one division a step, four lanes to a vector where the CPU has
// AVX2 (eigenPivotsFast, the same operations rounded alike). It reports
// false on a zero pivot that is a divisor.
func (w *eigenWork) pivots(lam *[8]float64, n int) bool {
	d, esq := w.d[:n], w.esq[:n]
	dp, ip := svdGrow64(&w.dp, 8*n), svdGrow64(&w.ip, 8*n)
	dm, im := svdGrow64(&w.dm, 8*n), svdGrow64(&w.im, 8*n)
	small, ok := eigenPivotsFast(d, esq, lam, n, dp, ip, dm, im)
	if !ok {
		small = pivotsGo(d, esq, lam, n, dp, ip, dm, im)
	}
	return small > 0
}

// pivotsGo is the portable pivots; it returns the smallest |pivot| that
// is a divisor (all but dp[n-1] and dm[0], which nothing divides by).
func pivotsGo(d, esq []float64, lam *[8]float64, n int, dp, ip, dm, im []float64) float64 {
	small := math.Inf(1)
	for q, l := range lam {
		p, m := d[0]-l, d[n-1]-l
		dp[q], ip[q] = p, 1/p
		dm[(n-1)*8+q], im[(n-1)*8+q] = m, 1/m
	}
	for i := 1; i < n; i++ {
		j := n - 1 - i
		for q, l := range lam {
			small = min(small, math.Abs(dp[(i-1)*8+q]), math.Abs(dm[(j+1)*8+q]))
			p := (d[i] - l) - esq[i-1]*ip[(i-1)*8+q]
			m := (d[j] - l) - esq[j]*im[(j+1)*8+q]
			dp[i*8+q], ip[i*8+q] = p, 1/p
			dm[j*8+q], im[j*8+q] = m, 1/m
		}
	}
	return small
}

// twisted writes into z (length n) the unit eigenvector of the tridiagonal
// (w.d, w.e) for its eigenvalue near lam, from the pivots of T - lam I
// and their reciprocals in lane q of pivots, and returns the residual
// ||T z - lam z||_2 and the Rayleigh quotient z^T T z, the eigenvalue
// refined to within about res^2 / gap. The twisted factorisation at k has the pivot
// gamma_k = dp[k] + dm[k] - (d[k] - lam); at the k with the smallest
// |gamma_k| it solves N_k^T z = e_k: z[k] = 1, then outwards
// z[i] = -e[i] z[i+1] / dp[i] above k and z[i] = -e[i-1] z[i-1] / dm[i]
// below (Dhillon and Parlett, 2004). The residual is computed, not taken
// from gamma_k, so that it holds whatever the rounding. It reports false
// on a non-finite value.
func (w *eigenWork) twisted(z []float64, lam float64, n, q int) (res, rq float64, ok bool) {
	d, e := w.d[:n], w.e[:n]
	dp, dm, ip, im := w.dp[q:], w.dm[q:], w.ip[q:], w.im[q:]
	k, best := 0, math.Inf(1)
	for i := 0; i < n; i++ {
		if g := math.Abs(dp[i*8] + dm[i*8] - (d[i] - lam)); g < best {
			k, best = i, g
		}
	}
	if math.IsNaN(best) || math.IsInf(best, 0) {
		return 0, 0, false
	}
	// The running product stays in a register: each step is one
	// multiplication on the chain.
	z[k] = 1
	nrm, zi := 1.0, 1.0
	for i := k - 1; i >= 0; i-- {
		zi *= -e[i] * ip[i*8]
		z[i] = zi
		nrm += zi * zi
	}
	zi = 1
	for i := k + 1; i < n; i++ {
		zi *= -e[i-1] * im[i*8]
		z[i] = zi
		nrm += zi * zi
	}
	if !(nrm >= 1) || math.IsInf(nrm, 0) {
		return 0, 0, false
	}
	inv := 1 / math.Sqrt(nrm)
	for i := range z[:n] {
		z[i] *= inv
	}
	// t = T z - lam z, row by row (the first and last rows have one
	// neighbour); z^T t corrects lam to the Rayleigh quotient.
	t := (d[0] - lam) * z[0]
	if n > 1 {
		t += e[0] * z[1]
	}
	res, rq = t*t, t*z[0]
	for i := 1; i < n-1; i++ {
		t := e[i-1]*z[i-1] + (d[i]-lam)*z[i] + e[i]*z[i+1]
		res += t * t
		rq += t * z[i]
	}
	if n > 1 {
		t = e[n-2]*z[n-2] + (d[n-1]-lam)*z[n-1]
		res += t * t
		rq += t * z[n-1]
	}
	return math.Sqrt(res), lam + rq, true
}

// backTransform turns the r columns of x (n x r, row-major), eigenvectors
// of T, into those of A = Q T Q^T: x becomes Q x = H_0 ... H_{n-3} x, the
// reflectors of tridiagonalize (stored in a) applied from the left, H_{n-3}
// first, each to the rows j+1 .. n-1 only: with the block X of those rows,
// X -= v (tau X^T v)^T. The rows are r long, the vectors side by side, so
// that both kernels run along them.
func (w *eigenWork) backTransform(a []float64, n int, x []float64, r int) {
	if r == 0 {
		return
	}
	wv := w.tmp[:r]
	for j := n - 3; j >= 0; j-- {
		t := w.tau[j]
		if t == 0 {
			continue
		}
		m := n - j - 1
		v := a[j*n+j+1 : (j+1)*n]
		block := x[(j+1)*r:]
		gemvT(wv, block, r, m, r, v)
		for i := range wv {
			wv[i] *= t
		}
		ger(block, r, m, r, v, wv)
	}
}
