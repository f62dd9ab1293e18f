package reconstruct

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/lapack"
	"gonum.org/v1/gonum/lapack/lapack64"

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
// columns, q power iterations Y = A (A^T Y), every step re-orthonormalised
// (CholeskyQR with a float64 Gram matrix, Householder QR in float64 when
// the sketch is nearly rank-deficient; see orthonormalizeRows32), then the
// SVD of the small B = Q^T A (k x cols) from the eigen-decomposition of
// B B^T in float64. The products with A are float32 (see randomized for
// why that is enough); a component below 2^-16 sigma_1 of B is treated as
// zero (see gram). When k would reach min(rows, cols) the sketch saves
// nothing and A itself goes to LAPACK's dgesvd in float64: the result is
// then the exact SVD.
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
	var total float64
	for i, v := range a {
		f := float64(v)
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, fmt.Errorf("%w: svd: element %d (row %d, col %d) is %v", format.ErrInvalidArgument, i, i/cols, i%cols, v)
		}
		total += f * f
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
	if k == min(rows, cols) {
		d, ok = w.exact(a, rows, cols)
	} else {
		d, ok = w.randomized(a, rows, cols, k, max(opts.PowerIters, 0), opts.Seed)
	}
	if !ok {
		return nil, fmt.Errorf("%w: svd: %dx%d: LAPACK (dgesvd or dsyev) did not converge", format.ErrInvalidArgument, rows, cols)
	}
	return d.factors(chooseRank(d.s, total, opts)), nil
}

// svdWork is the scratch of one SVD call, pooled so that the many calls of
// an ingest (one per span, layer, head, K and V) do not allocate it again.
// Nothing in it outlives the call that holds it.
type svdWork struct {
	at, yt, zt, omega, ubt, ut    []float32
	a64, u64, vt64, s, ev, lapack []float64
	qr                            qrWork
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
// len(s) x cols in float64; left writes the first r left singular vectors
// into u (rows x r, row-major).
type denseSVD struct {
	rows, cols int
	s, vt      []float64
	left       func(u []float32, r int)
}

// exact is dgesvd of the whole matrix (thin U and Vt) in float64.
func (w *svdWork) exact(a []float32, rows, cols int) (*denseSVD, bool) {
	m := min(rows, cols)
	a64 := svdGrow64(&w.a64, len(a))
	for i, v := range a {
		a64[i] = float64(v)
	}
	u := blas64.General{Rows: rows, Cols: m, Stride: m, Data: svdGrow64(&w.u64, rows*m)}
	vt := blas64.General{Rows: m, Cols: cols, Stride: cols, Data: svdGrow64(&w.vt64, m*cols)}
	s := svdGrow64(&w.s, m)
	if !w.small(blas64.General{Rows: rows, Cols: cols, Stride: cols, Data: a64}, u, vt, s) {
		return nil, false
	}
	return &denseSVD{rows: rows, cols: cols, s: s, vt: vt.Data, left: func(dst []float32, r int) {
		for t := 0; t < rows; t++ {
			for i, v := range u.Data[t*m : t*m+r] {
				dst[t*r+i] = float32(v)
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
// which is all the next product needs); the final Q gets two.
func (w *svdWork) randomized(a []float32, rows, cols, k, q int, seed uint64) (*denseSVD, bool) {
	at := svdGrow32(&w.at, rows*cols)
	for i := 0; i < rows; i++ {
		for j, v := range a[i*cols : (i+1)*cols] {
			at[j*rows+i] = v
		}
	}
	yt := svdGrow32(&w.yt, k*rows)
	zt := svdGrow32(&w.zt, k*cols)
	matmulF32(yt, rows, svdSketch(svdGrow32(&w.omega, k*cols), seed), cols, at, rows, k, rows, cols) // (A Omega)^T
	w.qr.orthonormalizeRows32(yt, k, rows, q > 0)
	for it := 0; it < q; it++ {
		matmulF32(zt, cols, yt, rows, a, cols, k, cols, rows) // (A^T Q)^T
		w.qr.orthonormalizeRows32(zt, k, cols, true)
		matmulF32(yt, rows, zt, cols, at, rows, k, rows, cols) // (A Z)^T
		w.qr.orthonormalizeRows32(yt, k, rows, it+1 < q)
	}
	// B = Q^T A (k x cols) = Ub diag(s) Vt, so A ~ Q B = (Q Ub) diag(s) Vt.
	matmulF32(zt, cols, yt, rows, a, cols, k, cols, rows)
	b := blas64.General{Rows: k, Cols: cols, Stride: cols, Data: svdGrow64(&w.a64, k*cols)}
	for i, v := range zt {
		b.Data[i] = float64(v)
	}
	ub := blas64.General{Rows: k, Cols: k, Stride: k, Data: svdGrow64(&w.u64, k*k)}
	vt := blas64.General{Rows: k, Cols: cols, Stride: cols, Data: svdGrow64(&w.vt64, k*cols)}
	s := svdGrow64(&w.s, k)
	if !w.gram(b, ub, vt, s) {
		return nil, false
	}
	return &denseSVD{rows: rows, cols: cols, s: s, vt: vt.Data, left: func(dst []float32, r int) {
		// U^T = Ub[:, :r]^T Q^T (r x rows), then transposed into dst.
		ubt := svdGrow32(&w.ubt, r*k)
		for i := 0; i < k; i++ {
			for j := 0; j < r; j++ {
				ubt[j*k+i] = float32(ub.Data[i*k+j])
			}
		}
		ut := svdGrow32(&w.ut, r*rows)
		matmulF32(ut, rows, ubt, k, yt, rows, r, rows, k)
		for i := 0; i < r; i++ {
			for t, v := range ut[i*rows : (i+1)*rows] {
				dst[t*r+i] = v
			}
		}
	}}, true
}

// small is LAPACK dgesvd of a (overwritten) into thin u, vt and s.
func (w *svdWork) small(a, u, vt blas64.General, s []float64) bool {
	var q [1]float64
	lapack64.Gesvd(lapack.SVDStore, lapack.SVDStore, a, u, vt, s, q[:], -1)
	work := svdGrow64(&w.lapack, max(int(q[0]), 1))
	return lapack64.Gesvd(lapack.SVDStore, lapack.SVDStore, a, u, vt, s, work, len(work))
}

// gram is the SVD of the small k x cols matrix b through the eigen-
// decomposition of its Gram matrix b b^T (k x k) in float64, LAPACK dsyev:
// b = ub diag(s) vt with vt = diag(1/s) ub^T b. It is three times cheaper
// here than dgesvd of b. Squaring b squares its condition number: an
// eigenvector is accurate to about 2^-52 (s_1/s_i)^2, so components with
// s_i <= 2^-16 s_1, whose vectors would carry errors near 2^-20, are set to
// 0 (and dropped). That is no loss: b comes from float32 products and
// carries errors of that order already. ub is used as the Gram's storage.
func (w *svdWork) gram(b, ub, vt blas64.General, s []float64) bool {
	k := b.Rows
	g := blas64.Symmetric{N: k, Stride: k, Uplo: blas.Upper, Data: ub.Data}
	blas64.Syrk(blas.NoTrans, 1, b, 0, g)
	ev := svdGrow64(&w.ev, k)
	var q [1]float64
	lapack64.Syev(lapack.EVCompute, g, ev, q[:], -1)
	work := svdGrow64(&w.lapack, max(int(q[0]), 1))
	if !lapack64.Syev(lapack.EVCompute, g, ev, work, len(work)) {
		return false
	}
	// dsyev sorts ascending; reverse into descending order.
	for i := 0; i < k; i++ {
		slices.Reverse(ub.Data[i*k : (i+1)*k])
	}
	for i := range s {
		s[i] = math.Sqrt(max(ev[k-1-i], 0))
	}
	// vt = ub^T b row by row: row i is the sum over p of ub[p][i] b[p],
	// long contiguous axpys (gonum's Gemm spends more on these small
	// shapes in its blocking than in the arithmetic).
	for i := 0; i < k; i++ {
		row := vt.Data[i*vt.Stride : i*vt.Stride+vt.Cols]
		clear(row)
		for p := 0; p < k; p++ {
			blas64.Axpy(ub.Data[p*k+i], blas64.Vector{N: len(row), Inc: 1, Data: b.Data[p*b.Stride : p*b.Stride+len(row)]},
				blas64.Vector{N: len(row), Inc: 1, Data: row})
		}
	}
	for i := range s {
		if s[i] <= s[0]*0x1p-16 {
			s[i] = 0
			continue
		}
		row := vt.Data[i*vt.Stride : i*vt.Stride+vt.Cols]
		for j := range row {
			row[j] /= s[i]
		}
	}
	return true
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

// factors truncates to rank r, fixes signs and rounds to float32.
func (d *denseSVD) factors(r int) *Factors {
	f := &Factors{Rows: d.rows, Cols: d.cols, Rank: r,
		U: make([]float32, d.rows*r), S: make([]float32, r), Vt: make([]float32, r*d.cols)}
	if r == 0 {
		return f
	}
	d.left(f.U, r)
	for i := 0; i < r; i++ {
		row := d.vt[i*d.cols : (i+1)*d.cols]
		best := 0
		for j, v := range row {
			if math.Abs(v) > math.Abs(row[best]) {
				best = j
			}
		}
		sign := math.Copysign(1, row[best])
		f.S[i] = float32(d.s[i])
		for j, v := range row {
			f.Vt[i*d.cols+j] = float32(sign * v)
		}
		if sign < 0 {
			for t := 0; t < d.rows; t++ {
				f.U[t*r+i] = -f.U[t*r+i]
			}
		}
	}
	return f
}
