package reconstruct

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sync"

	"github.com/kvstore/kvstore/format"
)

// Defaults for SVDOptions. SeKV keeps at most 32 components per span.
const (
	DefaultMaxRank    = 32
	DefaultOversample = 8
	DefaultPowerIters = 1
	DefaultEnergy     = 0.99
	maxPowerIters     = 16
)

// SVDOptions configures SVD. The zero value, after EnsureDefaults, is the
// default: at most 32 components, as few as keep 99% of the energy.
type SVDOptions struct {
	// MaxRank is r_max, the most components kept. 0 means DefaultMaxRank.
	MaxRank int
	// Rank, when > 0, is a fixed rank (a rank gate): exactly
	// min(Rank, rows, cols) components are kept unless the matrix has
	// fewer numerically non-zero ones. It must not exceed MaxRank. 0 means
	// choose by Energy.
	Rank int
	// Energy e in (0, 1]: keep the fewest components r whose sum of
	// sigma_i^2 reaches e times the squared Frobenius norm of the whole
	// matrix (or MaxRank if none does). 0 means DefaultEnergy.
	Energy float64
	// Oversample is p, the extra sketch columns. 0 means
	// DefaultOversample; a negative value means none.
	Oversample int
	// PowerIters is q, the subspace (power) iterations, each re-
	// orthonormalised. 0 means DefaultPowerIters; a negative value means
	// none. At most 16.
	PowerIters int
	// Seed seeds the Gaussian sketch; 0 is a valid seed.
	Seed uint64
}

// EnsureDefaults replaces zero fields by their defaults and returns o.
func (o *SVDOptions) EnsureDefaults() *SVDOptions {
	if o.MaxRank == 0 {
		o.MaxRank = DefaultMaxRank
	}
	if o.Energy == 0 {
		o.Energy = DefaultEnergy
	}
	if o.Oversample == 0 {
		o.Oversample = DefaultOversample
	}
	if o.PowerIters == 0 {
		o.PowerIters = DefaultPowerIters
	}
	return o
}

// Validate checks options that have had their defaults applied. Errors wrap
// format.ErrInvalidArgument.
func (o *SVDOptions) Validate() error {
	switch {
	case o.MaxRank < 1 || o.MaxRank > maxFactorCols:
		return fmt.Errorf("%w: svd options: max rank %d not in [1, %d]", format.ErrInvalidArgument, o.MaxRank, maxFactorCols)
	case o.Rank < 0 || o.Rank > o.MaxRank:
		return fmt.Errorf("%w: svd options: rank %d not in [0, max rank %d]", format.ErrInvalidArgument, o.Rank, o.MaxRank)
	case !(o.Energy > 0 && o.Energy <= 1):
		return fmt.Errorf("%w: svd options: energy %v not in (0, 1]", format.ErrInvalidArgument, o.Energy)
	case o.PowerIters > maxPowerIters:
		return fmt.Errorf("%w: svd options: %d power iterations > %d", format.ErrInvalidArgument, o.PowerIters, maxPowerIters)
	case o.Oversample > maxFactorCols:
		return fmt.Errorf("%w: svd options: oversample %d > %d", format.ErrInvalidArgument, o.Oversample, maxFactorCols)
	}
	return nil
}

// SVD computes a truncated SVD of a, a rows x cols float32 matrix,
// row-major: for one span in one (layer, KV head), rows are tokens and cols
// head dims (keys un-rotated first, see Unapply).
//
// It is the randomized range finder of Halko, Martinsson and Tropp (2011,
// algorithms 4.4 and 5.1): a Gaussian sketch Y = A Omega of k = target+p
// columns, q power iterations Y = A (A^T Y), every product re-
// orthonormalised, in the first iteration only one of two where that is
// safe (CholeskyQR with a float64 Gram matrix, Householder QR in float64
// when the sketch is nearly rank-deficient; see orthonormalizeRows32 and
// rangeFinder). A span well short of its width (wideCheaper: under 98
// rows of 128 dims at rank 32, past the shorter ones of the next
// paragraph) is sketched through C = c A A^T instead,
// Y = C^(q+1) Omega (wideRange): one power of A A^T more for the same q,
// with fewer products. Then the SVD of
// the small B = Q^T A (k x cols) from the eigen-decomposition of B B^T in
// float64 (Householder tridiagonalisation, then eigenvectors by twisted
// factorisations where the gaps allow and implicit QL otherwise, see
// eigenWork.sym). The products with A are float32 (see randomized for why
// that is enough); a component below 2^-16 sigma_1 of B is treated as zero
// (see gram). When k would reach min(rows, cols) the sketch saves
// nothing, and within a factor 1.5 of it it saves less than it costs: the
// same small SVD is then taken of A itself (or of A^T when rows > cols),
// the exact SVD but for components below 2^-16 sigma_1, which are set to
// 0 (see whole); PowerIters and Seed play no part there.
//
// Components are in decreasing sigma, each with the largest-magnitude
// element of its Vt row positive (the first on ties), so that a given input
// and options give the same factors on a given platform. Components with
// sigma <= 2^-24 ||A||_F, at the level of float32 rounding of the input, are
// dropped; a zero matrix gives Rank 0. Errors wrap format.ErrInvalidArgument:
// bad options, a shape that does not match len(a), NaN or Inf input.
func SVD(a []float32, rows, cols int, opts SVDOptions) (*Factors, error) {
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if rows < 1 || cols < 1 || cols > maxFactorCols || uint64(rows) > math.MaxUint32 || rows > math.MaxInt/cols || len(a) != rows*cols {
		return nil, fmt.Errorf("%w: svd: %d floats as %dx%d (cols <= %d)", format.ErrInvalidArgument, len(a), rows, cols, maxFactorCols)
	}
	// The sum is finite exactly when every element is (sumSquaresF32); the
	// input is searched only when it is not.
	total := sumSquaresF32(a)
	if math.IsNaN(total) || math.IsInf(total, 0) {
		for i, v := range a {
			if f := float64(v); math.IsNaN(f) || math.IsInf(f, 0) {
				return nil, fmt.Errorf("%w: svd: element %d (row %d, col %d) is %v", format.ErrInvalidArgument, i, i/cols, i%cols, v)
			}
		}
	}
	if total == 0 {
		return &Factors{Rows: rows, Cols: cols}, nil
	}
	target := opts.MaxRank
	if opts.Rank > 0 {
		target = opts.Rank
	}
	k := min(target+max(opts.Oversample, 0), rows, cols)
	w := svdPool.Get().(*svdWork)
	defer svdPool.Put(w)
	var d *denseSVD
	var ok bool
	if m := min(rows, cols); k == m || m <= k+k/2 {
		d, ok = w.whole(a, rows, cols, target)
	} else {
		d, ok = w.randomized(a, rows, cols, k, target, max(opts.PowerIters, 0), opts.Seed, math.Sqrt(total))
	}
	if !ok {
		return nil, fmt.Errorf("%w: svd: %dx%d: the QL iteration did not converge", format.ErrInvalidArgument, rows, cols)
	}
	return d.factors(chooseRank(d.s, total, opts)), nil
}

// svdWork is the scratch of one SVD call, pooled so that the many calls of
// an ingest (one per span, layer, head, K and V) do not allocate it again.
// Nothing in it outlives the call that holds it but the sketch Omega, a
// pure function of (seed, k, cols) kept for the next call.
type svdWork struct {
	at, yt, zt, omega, ubt, ut []float32
	c                          []float32 // wideRange: c A A^T
	a64, u64, vt64, s, ev      []float64
	qr                         qrWork
	eig                        eigenWork
	// The sketch in omega is a pure function of these; it is kept for the
	// next call with the same ones (an ingest uses one seed and shape).
	omegaSeed      uint64
	omegaK, omegaN int
}

var svdPool = sync.Pool{New: func() any { return new(svdWork) }}

func svdGrow32(b *[]float32, n int) []float32 {
	if cap(*b) < n {
		*b = make([]float32, n)
	}
	return (*b)[:n]
}

func svdGrow64(b *[]float64, n int) []float64 {
	if cap(*b) < n {
		*b = make([]float64, n)
	}
	return (*b)[:n]
}

// denseSVD is A ~ U diag(s) Vt before truncation, s descending and vt
// (at least the rows that can be kept) in float64; left writes the first r
// left singular vectors, vector i times sign[i] (+1 or -1), into u (rows x
// r, row-major).
type denseSVD struct {
	rows, cols int
	s, vt      []float64
	left       func(u []float32, r int, sign []float32)
}

// whole is the SVD of the whole matrix, for when the sketch would span it
// or nearly (min(rows, cols) <= 1.5 k: at 64 x 128 and k = 40 it takes as
// long as randomized, below that less): gram's route with Q = I, on A
// itself when rows <= cols (B = A: U = Ub) and on A^T otherwise (B = A^T:
// gram's Ub is V and its Vt is U^T). The Gram matrix of the float32 rows is exact
// products summed in float64, so this is the exact SVD to the level gram
// states: components below 2^-16 sigma_1 are set to 0 (and dropped), the
// others' vectors are accurate to about 2^-53 (sigma_1/sigma_i)^2. It
// replaced LAPACK's dgesvd in float64, 3-9x slower on spans of 16-40 rows
// of 128 dims.
func (w *svdWork) whole(a []float32, rows, cols, target int) (*denseSVD, bool) {
	m, n, b := rows, cols, a
	if rows > cols {
		m, n = cols, rows
		b = svdGrow32(&w.at, rows*cols)
		svdTranspose(b, a, rows, cols, 1)
	}
	r := min(target, m)
	ubt := svdGrow64(&w.u64, r*m)
	bt := svdGrow64(&w.vt64, r*n) // diag(1/s) Ub^T B: Vt, or U^T when tall
	s := svdGrow64(&w.s, m)
	if !w.gram(b, m, n, r, ubt, bt, s) {
		return nil, false
	}
	// ut holds U^T (r x rows) row by row: Ub^T when wide, bt when tall.
	vt, ut := bt, ubt
	if rows > cols {
		vt, ut = ubt, bt
	}
	return &denseSVD{rows: rows, cols: cols, s: s, vt: vt, left: func(dst []float32, rr int, sign []float32) {
		for i, sg := range sign[:rr] {
			for t, v := range ut[i*rows : (i+1)*rows] {
				dst[t*rr+i] = sg * float32(v)
			}
		}
	}}, true
}

// randomized is the HMT range finder with k sketch vectors and q power
// iterations. The sketches are kept transposed (k x rows and k x cols, one
// basis vector per contiguous row) and A^T beside A, so that every product
// is matmulF32 over long rows. The products are float32 (the AVX2 kernel
// where there is one): rounding there perturbs the range found by about
// 1e-7 and B = Q^T A by about sqrt(rows)*2^-24 of ||A||, far below the
// truncation error and below f16/bf16 storage; the Gram matrices and
// Cholesky factors of the orthonormalisations and the small SVD, where
// accuracy is lost if anywhere, are float64. The intermediate bases of the
// power iterations get one CholeskyQR pass (orthonormal to about 2^-12,
// which is all the next product needs), the final Q two; rangeFinder says
// which basis of the first iteration does without, and why A^T is kept
// scaled.
func (w *svdWork) randomized(a []float32, rows, cols, k, target, q int, seed uint64, norm float64) (*denseSVD, bool) {
	at := svdGrow32(&w.at, rows*cols)
	svdTranspose(at, a, rows, cols, atScale(norm))
	yt := svdGrow32(&w.yt, k*rows)
	zt := svdGrow32(&w.zt, k*cols)
	if wideCheaper(rows, cols, k) {
		w.wideRange(a, at, yt, zt, rows, cols, k, q, seed)
	} else {
		w.rangeFinder(a, at, yt, zt, rows, cols, k, q, seed)
	}
	// B = Q^T A (k x cols) = Ub diag(s) Vt, so A ~ Q B = (Q Ub) diag(s) Vt.
	matmulF32(zt, cols, yt, rows, a, cols, k, cols, rows)
	r := min(target, k)
	ubt := svdGrow64(&w.u64, r*k) // Ub^T, first r rows
	vt := svdGrow64(&w.vt64, r*cols)
	s := svdGrow64(&w.s, k)
	if !w.gram(zt, k, cols, r, ubt, vt, s) {
		return nil, false
	}
	return &denseSVD{rows: rows, cols: cols, s: s, vt: vt, left: func(dst []float32, rr int, sign []float32) {
		// U^T = Ub[:, :rr]^T Q^T (rr x rows), then transposed into dst.
		ub32 := svdGrow32(&w.ubt, rr*k)
		for i, sg := range sign[:rr] {
			row, out := ubt[i*k:(i+1)*k], ub32[i*k:(i+1)*k]
			out = out[:len(row)]
			for p, v := range row {
				out[p] = sg * float32(v)
			}
		}
		ut := svdGrow32(&w.ut, rr*rows)
		matmulF32(ut, rows, ub32, k, yt, rows, rr, rows, k)
		svdTranspose(dst, ut, rr, rows, 1)
	}}, true
}

// wideCheaper says whether wideRange is the cheaper range finder for a
// rows x cols matrix and k sketch vectors (q = 1): forming C costs about
// 0.6 rows^2 cols multiply-adds (the upper half in 16-column tiles) and its
// two products 2 k rows^2, against rangeFinder's 3 k rows cols, so below
// rows = 3 k cols / (0.6 cols + 2 k): 98 rows for 128-dim heads and
// k = 40, every span for 64-dim ones.
func wideCheaper(rows, cols, k int) bool {
	return rows <= cols && rows*(3*cols+10*k) < 15*k*cols
}

// wideRange is rangeFinder for a matrix no taller than it is wide (rows
// <= cols), on C = c A A^T (rows x rows; at = c A^T, so one float32
// product of A's size, C of the size of A): it leaves in yt the
// orthonormal basis Q^T of the range of C^(q+1) Omega, Omega rows x k
// Gaussian. Each product with C is rows long, where rangeFinder makes two
// products with A, cols and rows long, per power of A A^T; so it reaches
// one power of A A^T more than rangeFinder does with the same q (for
// q = 1, (A A^T)^2 Omega against (A A^T) A Omega) at about 60% of its
// float32 products. Every basis is orthonormalised before the next
// product (one CholeskyQR pass, two for the last): C squares A's
// condition number, so skipping one, as rangeFinder may, is not safe
// here. Forming C in float32 rounds it by about 2^-21 ||A||_F^2, which
// blurs directions with sigma_i below about 2^-10 sigma_1, as the float32
// product A A^T Q0 of rangeFinder does; the Rayleigh-Ritz step after it is
// on B = Q^T A, not on C, so that U and Vt stay orthonormal whatever C's
// rounding.
func (w *svdWork) wideRange(a, at, yt, zt []float32, rows, cols, k, q int, seed uint64) {
	c := svdGrow32(&w.c, rows*rows)
	// C is symmetric: each block of four rows from the 16-column tile
	// holding its diagonal on, then the rest mirrored (about 5/8 of the
	// products of the whole).
	for i := 0; i < rows; i += 4 {
		j0 := i &^ 15
		matmulF32(c[i*rows+j0:], rows, a[i*cols:], cols, at[j0:], rows, min(4, rows-i), rows-j0, cols)
	}
	for i := 16; i < rows; i++ {
		for j := range i &^ 15 {
			c[i*rows+j] = c[j*rows+i]
		}
	}
	wt := zt[:k*rows]
	// Omega^T is the first rows columns of the k x cols sketch: Gaussian as
	// well, and cached across spans of every length for one head dim.
	matmulF32(yt, rows, w.sketch(k, cols, seed), cols, c, rows, k, rows, rows) // (C Omega)^T
	for it := 0; it < q; it++ {
		w.qr.orthonormalizeRows32(yt, k, rows, true)
		matmulF32(wt, rows, yt, rows, c, rows, k, rows, rows) // (C Q)^T
		copy(yt, wt)
	}
	w.qr.orthonormalizeRows32(yt, k, rows, false)
}

// rangeFinder leaves in yt (k x rows) the orthonormal basis Q^T of the
// range of (A A^T)^q A Omega, given at = c A^T, c the power of two near
// 1/||A||_F of atScale. Every product of a power iteration is
// orthonormalised before the next one, but in the first iteration only
// the shorter of A Omega (rows long) and A^T Q0 (cols long) is: the other
// one is not, but as every product with at carries the factor c (a power
// of two, so the same float32 bits as scaling the product once made,
// unless a subnormal value appears), the product after it has the size it
// would have after orthonormalising and neither overflows nor underflows
// float32 where A does not. Every other product with at is orthonormalised
// before it is used, which takes the factor out. Skipping a basis changes
// no span, only conditioning: the product after it has a condition
// number near kappa^2, kappa that of A on the sketch, and its own pass,
// with the usual pivot bound cholFirstTol, accepts it only when that is
// at most 2^12, when its float32 rounding blurs the weakest direction by
// 2^-24 kappa^2 <= 2^-12 of its size, what an intermediate basis is
// allowed anyway. Past that bound, the skipped basis is orthonormalised
// after all and the product made again: the result is then that of
// orthonormalising every step.
func (w *svdWork) rangeFinder(a, at, yt, zt []float32, rows, cols, k, q int, seed uint64) {
	matmulF32(yt, rows, w.sketch(k, cols, seed), cols, at, rows, k, rows, cols) // c (A Omega)^T
	if q == 0 {
		w.qr.orthonormalizeRows32(yt, k, rows, false)
		return
	}
	it := 0
	if rows <= cols {
		// Orthonormalise A Omega, not A^T Q0.
		w.qr.orthonormalizeRows32(yt, k, rows, true)
		matmulF32(zt, cols, yt, rows, a, cols, k, cols, rows)  // (A^T Q0)^T
		matmulF32(yt, rows, zt, cols, at, rows, k, rows, cols) // c (A A^T Q0)^T
		if !w.qr.cholRows32(yt, k, rows, cholFirstTol) {
			w.qr.orthonormalizeRows32(zt, k, cols, true)
			matmulF32(yt, rows, zt, cols, at, rows, k, rows, cols)
			w.qr.orthonormalizeRows32(yt, k, rows, q > 1)
		} else if q == 1 {
			w.qr.secondPass32(yt, k, rows)
		}
		it = 1
	} else {
		// Orthonormalise A^T (c A Omega), not c A Omega.
		matmulF32(zt, cols, yt, rows, a, cols, k, cols, rows) // (A^T Y0)^T
		if !w.qr.cholRows32(zt, k, cols, cholFirstTol) {
			w.qr.orthonormalizeRows32(yt, k, rows, true)
			matmulF32(zt, cols, yt, rows, a, cols, k, cols, rows)
			w.qr.orthonormalizeRows32(zt, k, cols, true)
		}
		matmulF32(yt, rows, zt, cols, at, rows, k, rows, cols) // (A Z)^T
		w.qr.orthonormalizeRows32(yt, k, rows, q > 1)
		it = 1
	}
	for ; it < q; it++ {
		matmulF32(zt, cols, yt, rows, a, cols, k, cols, rows) // (A^T Q)^T
		w.qr.orthonormalizeRows32(zt, k, cols, true)
		matmulF32(yt, rows, zt, cols, at, rows, k, rows, cols) // (A Z)^T
		w.qr.orthonormalizeRows32(yt, k, rows, it+1 < q)
	}
}

// atScale is the factor c of at = c A^T (see rangeFinder): 2^-e for
// ||A||_F = norm in [2^(e-1), 2^e), so that c A is at most 1 in magnitude,
// kept within [2^-126, 2^127], the normal float32 powers of two (beyond
// them A is all subnormal, or so large that B = Q^T A nears overflow
// anyway).
func atScale(norm float64) float32 {
	_, e := math.Frexp(norm)
	return float32(math.Ldexp(1, min(max(-e, -126), 127)))
}

// svdTranspose sets at (cols x rows) to f times the transpose of a (rows x
// cols), each element one float32 product (exact for f a power of two,
// unless it is subnormal). Eight rows of a are read at a time, each a run
// along the row, so that the writes are runs of eight.
func svdTranspose(at, a []float32, rows, cols int, f float32) {
	i := 0
	for ; i+8 <= rows; i += 8 {
		r0, r1, r2, r3 := a[i*cols:(i+1)*cols], a[(i+1)*cols:(i+2)*cols], a[(i+2)*cols:(i+3)*cols], a[(i+3)*cols:(i+4)*cols]
		r4, r5, r6, r7 := a[(i+4)*cols:(i+5)*cols], a[(i+5)*cols:(i+6)*cols], a[(i+6)*cols:(i+7)*cols], a[(i+7)*cols:(i+8)*cols]
		r1, r2, r3, r4, r5, r6, r7 = r1[:len(r0)], r2[:len(r0)], r3[:len(r0)], r4[:len(r0)], r5[:len(r0)], r6[:len(r0)], r7[:len(r0)]
		for j, v := range r0 {
			out := at[j*rows+i : j*rows+i+8 : j*rows+i+8]
			out[0], out[1], out[2], out[3] = v*f, r1[j]*f, r2[j]*f, r3[j]*f
			out[4], out[5], out[6], out[7] = r4[j]*f, r5[j]*f, r6[j]*f, r7[j]*f
		}
	}
	for ; i < rows; i++ {
		for j, v := range a[i*cols : (i+1)*cols] {
			at[j*rows+i] = v * f
		}
	}
}

// gram is the SVD of the small k x cols matrix b (float32, row-major)
// through the eigen-decomposition of its Gram matrix b b^T (k x k):
// b = Ub diag(s) Vt with Vt = diag(1/s) Ub^T b. The Gram matrix is exact
// products summed in float64 (gramF32), the eigen-decomposition float64
// (eigenWork.sym), and Vt's rows the float64 products of Ub's columns,
// each scaled by 1/s_i first (k elements rather than cols; 0 for a
// component set to 0), with b (mulF64F32). It writes all k values s and the first r rows of Ub^T (ubt,
// r x k) and of Vt (r x cols). Squaring b squares its condition number:
// an eigenvector is accurate to about 2^-52 (s_1/s_i)^2, so components
// with s_i <= 2^-16 s_1, whose vectors would carry errors near 2^-20, are
// set to 0 (and dropped). That is no loss: b comes from float32 products
// and carries errors of that order already.
func (w *svdWork) gram(b []float32, k, cols, r int, ubt, vt, s []float64) bool {
	g := svdGrow64(&w.a64, k*k)
	gramF32(g, b, k, cols)
	ev := svdGrow64(&w.ev, k)
	if !w.eig.sym(g, k, ev, ubt, r) {
		return false
	}
	for i := range s {
		if s[i] = math.Sqrt(max(ev[i], 0)); s[i] <= s[0]*0x1p-16 {
			s[i] = 0
		}
	}
	ubs := g[:r*k] // diag(1/s) Ub^T; g is free once sym is done
	for i := 0; i < r; i++ {
		var inv float64
		if s[i] > 0 {
			inv = 1 / s[i]
		}
		for p, v := range ubt[i*k : (i+1)*k] {
			ubs[i*k+p] = v * inv
		}
	}
	mulF64F32(vt, cols, ubs, k, b, cols, r, cols, k)
	return true
}

// sketch returns Omega^T (k x cols) for seed, made by svdSketch or kept
// from the previous call with the same seed and shape.
func (w *svdWork) sketch(k, cols int, seed uint64) []float32 {
	if w.omega == nil || w.omegaSeed != seed || w.omegaK != k || w.omegaN != cols {
		svdSketch(svdGrow32(&w.omega, k*cols), seed)
		w.omegaSeed, w.omegaK, w.omegaN = seed, k, cols
	}
	return w.omega[:k*cols]
}

// svdSketch fills g with the transposed Gaussian test matrix Omega^T
// (k x cols, row-major) for seed: standard normal draws from a PCG stream.
func svdSketch(g []float32, seed uint64) []float32 {
	rng := rand.New(rand.NewPCG(seed, 0x5eb5_1d5c_e7c4_a11a))
	for i := range g {
		g[i] = float32(rng.NormFloat64())
	}
	return g
}

// chooseRank applies the numerical cut-off, MaxRank, then Rank or Energy.
func chooseRank(s []float64, total float64, o SVDOptions) int {
	tol := math.Sqrt(total) * 0x1p-24
	n := 0
	for n < len(s) && n < o.MaxRank && s[n] > tol {
		n++
	}
	if o.Rank > 0 {
		return min(n, o.Rank)
	}
	var cum float64
	for i := 0; i < n; i++ {
		cum += s[i] * s[i]
		if cum >= o.Energy*total {
			return i + 1
		}
	}
	return n
}

// factors truncates to rank r, rounds to float32 and fixes signs on the
// float32 Vt rows (svdRowSign), so that the rule holds for what is
// returned.
func (d *denseSVD) factors(r int) *Factors {
	// One allocation for the three, each capped at its length.
	nu, nv := d.rows*r, r*d.cols
	buf := make([]float32, nu+r+nv)
	f := &Factors{Rows: d.rows, Cols: d.cols, Rank: r,
		U: buf[:nu:nu], S: buf[nu : nu+r : nu+r], Vt: buf[nu+r:]}
	if r == 0 {
		return f
	}
	sign := make([]float32, r)
	for i := range sign {
		f.S[i] = float32(d.s[i])
		sign[i] = svdRowSign(f.Vt[i*d.cols:(i+1)*d.cols], d.vt[i*d.cols:(i+1)*d.cols])
	}
	d.left(f.U, r, sign)
	return f
}

// svdRowSign rounds row into out (float32, as long) and negates out if its
// largest-magnitude element, the first on ties, is negative; it returns the
// sign applied, +1 or -1. Magnitudes order as the low 31 bits of a
// float32, so the signed maximum of the bits is the largest positive
// element (negative when there is none) and the unsigned maximum, when its
// top bit is set, the largest negative one: one pass of integer maxima,
// and a search only on a tie.
func svdRowSign(out []float32, row []float64) float32 {
	out = out[:len(row)]
	pos, all := int32(-1), uint32(0)
	for j, v := range row {
		x := float32(v)
		out[j] = x
		b := math.Float32bits(x)
		pos, all = max(pos, int32(b)), max(all, b)
	}
	neg := int32(-1)
	if all>>31 != 0 {
		neg = int32(all &^ (1 << 31))
	}
	if neg == pos {
		for _, x := range out {
			if b := math.Float32bits(x); int32(b&^(1<<31)) == pos {
				neg = pos + int32(b>>31) // the first is the negative one
				break
			}
		}
	}
	if neg <= pos {
		return 1
	}
	for j := range out {
		out[j] = -out[j]
	}
	return -1
}
