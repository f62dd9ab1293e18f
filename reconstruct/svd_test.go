package reconstruct

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/kvstore/kvstore/format"
)

// svdTestMatrix returns a rows x cols float32 matrix U diag(sigma) V^T with
// random orthonormal U and V, plus Gaussian noise of standard deviation
// noise per element.
func svdTestMatrix(rng *rand.Rand, rows, cols int, sigma []float64, noise float64) []float32 {
	r := len(sigma)
	u := svdRandomOrthonormal(rng, rows, r)
	v := svdRandomOrthonormal(rng, cols, r)
	a := make([]float32, rows*cols)
	for t := 0; t < rows; t++ {
		for j := 0; j < cols; j++ {
			var acc float64
			for i, s := range sigma {
				acc += u.At(t, i) * s * v.At(j, i)
			}
			a[t*cols+j] = float32(acc + noise*rng.NormFloat64())
		}
	}
	return a
}

// svdRandomOrthonormal returns an n x r matrix with orthonormal columns.
func svdRandomOrthonormal(rng *rand.Rand, n, r int) *mat.Dense {
	g := mat.NewDense(n, r, nil)
	for i := 0; i < n; i++ {
		for j := 0; j < r; j++ {
			g.Set(i, j, rng.NormFloat64())
		}
	}
	var qr mat.QR
	qr.Factorize(g)
	var q mat.Dense
	qr.QTo(&q)
	return q.Slice(0, n, 0, r).(*mat.Dense)
}

// keyLikeSpectrum is a decaying spectrum like pre-RoPE keys': a few strong
// directions, then a power-law tail (sigma_i = 40/i).
func keyLikeSpectrum(n int) []float64 {
	s := make([]float64, n)
	for i := range s {
		s[i] = 40 / float64(i+1)
	}
	return s
}

// svdOptimalError is the Frobenius error of the best rank-r approximation
// of a, from gonum's full SVD.
func svdOptimalError(t testing.TB, a []float32, rows, cols, r int) float64 {
	t.Helper()
	d := mat.NewDense(rows, cols, nil)
	for i, v := range a {
		d.Set(i/cols, i%cols, float64(v))
	}
	var s mat.SVD
	if !s.Factorize(d, mat.SVDNone) {
		t.Fatal("gonum svd failed")
	}
	var e float64
	for i, v := range s.Values(nil) {
		if i >= r {
			e += v * v
		}
	}
	return math.Sqrt(e)
}

// svdError is ||A - U diag(S) Vt||_F in float64.
func svdError(a []float32, f *Factors) float64 {
	var e float64
	for t := 0; t < f.Rows; t++ {
		for j := 0; j < f.Cols; j++ {
			acc := float64(a[t*f.Cols+j])
			for i := 0; i < f.Rank; i++ {
				acc -= float64(f.U[t*f.Rank+i]) * float64(f.S[i]) * float64(f.Vt[i*f.Cols+j])
			}
			e += acc * acc
		}
	}
	return math.Sqrt(e)
}

func svdNorm(a []float32) float64 {
	var s float64
	for _, v := range a {
		s += float64(v) * float64(v)
	}
	return math.Sqrt(s)
}

// svdCheckOrthonormal checks that the columns of U and the rows of Vt are
// orthonormal within tol.
func svdCheckOrthonormal(t *testing.T, f *Factors, tol float64) {
	t.Helper()
	for i := 0; i < f.Rank; i++ {
		for k := i; k < f.Rank; k++ {
			want := 0.0
			if i == k {
				want = 1
			}
			var uu, vv float64
			for r := 0; r < f.Rows; r++ {
				uu += float64(f.U[r*f.Rank+i]) * float64(f.U[r*f.Rank+k])
			}
			for c := 0; c < f.Cols; c++ {
				vv += float64(f.Vt[i*f.Cols+c]) * float64(f.Vt[k*f.Cols+c])
			}
			if math.Abs(uu-want) > tol || math.Abs(vv-want) > tol {
				t.Fatalf("u%d.u%d = %v, v%d.v%d = %v, want %v", i, k, uu, i, k, vv, want)
			}
		}
	}
}

func TestSVDNearOptimal(t *testing.T) {
	for _, tc := range []struct{ rows, cols, rank int }{
		{200, 64, 32}, {64, 100, 16}, {300, 48, 24}, {120, 128, 32},
	} {
		t.Run(fmt.Sprintf("%dx%d rank %d", tc.rows, tc.cols, tc.rank), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(tc.rows), uint64(tc.cols)))
			a := svdTestMatrix(rng, tc.rows, tc.cols, keyLikeSpectrum(min(tc.rows, tc.cols)), 0.03)
			f, err := SVD(a, tc.rows, tc.cols, SVDOptions{Rank: tc.rank})
			if err != nil {
				t.Fatal(err)
			}
			if f.Rank != tc.rank {
				t.Fatalf("%dx%d: rank %d, want %d", tc.rows, tc.cols, f.Rank, tc.rank)
			}
			opt := svdOptimalError(t, a, tc.rows, tc.cols, tc.rank)
			if got := svdError(a, f); got > 1.1*opt {
				t.Errorf("%dx%d rank %d: error %v > 1.1 x optimal %v", tc.rows, tc.cols, tc.rank, got, opt)
			}
			svdCheckOrthonormal(t, f, 1e-5)
			if err := f.Validate(); err != nil {
				t.Error(err)
			}
			for i := 1; i < f.Rank; i++ {
				if f.S[i] > f.S[i-1] {
					t.Fatalf("singular values not descending: %v", f.S)
				}
			}
		})
	}
}

func TestSVDExactLowRank(t *testing.T) {
	for _, tc := range []struct{ rows, cols int }{{100, 64}, {20, 16}, {48, 200}} {
		t.Run(fmt.Sprintf("%dx%d", tc.rows, tc.cols), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(9, uint64(tc.rows)))
			a := svdTestMatrix(rng, tc.rows, tc.cols, []float64{9, 7, 3, 1, 0.5}, 0)
			f, err := SVD(a, tc.rows, tc.cols, SVDOptions{Energy: 1})
			if err != nil {
				t.Fatal(err)
			}
			if f.Rank != 5 {
				t.Errorf("%dx%d: rank %d, want the numerical rank 5", tc.rows, tc.cols, f.Rank)
			}
			if rel := svdError(a, f) / svdNorm(a); rel > 1e-4 {
				t.Errorf("%dx%d: relative error %v", tc.rows, tc.cols, rel)
			}
			svdCheckOrthonormal(t, f, 1e-5)
		})
	}
}

func TestSVDEnergyRank(t *testing.T) {
	sigma := []float64{8, 4, 2, 1, 0.5, 0.25} // sigma^2: 64 16 4 1 .25 .0625, total 85.3125
	rng := rand.New(rand.NewPCG(1, 1))
	a := svdTestMatrix(rng, 12, 10, sigma, 0) // small enough for the exact path
	for _, tc := range []struct {
		opts SVDOptions
		want int
	}{
		{SVDOptions{Energy: 0.75}, 1}, // 64 >= 63.98
		{SVDOptions{Energy: 0.9}, 2},  // 80 >= 76.78
		{SVDOptions{}, 4},             // 0.99: 85 >= 84.46
		{SVDOptions{Energy: 0.999}, 5},
		{SVDOptions{Energy: 1}, 6},
		{SVDOptions{MaxRank: 3}, 3},
		{SVDOptions{Rank: 2, Energy: 0.5}, 2},
		{SVDOptions{Rank: 32}, 6}, // a fixed rank above the numerical rank
	} {
		t.Run(fmt.Sprintf("%+v", tc.opts), func(t *testing.T) {
			f, err := SVD(a, 12, 10, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			if f.Rank != tc.want {
				t.Errorf("%+v: rank %d, want %d", tc.opts, f.Rank, tc.want)
			}
			for i := 0; i < f.Rank; i++ {
				if math.Abs(float64(f.S[i])-sigma[i]) > 1e-5*sigma[0] {
					t.Errorf("sigma %d = %v, want %v", i, f.S[i], sigma[i])
				}
			}
		})
	}
	// The randomized path picks by energy as well.
	big := svdTestMatrix(rng, 200, 100, []float64{10, 9, 8, 0.1, 0.05}, 1e-3)
	f, err := SVD(big, 200, 100, SVDOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if f.Rank != 3 {
		t.Errorf("randomized: rank %d, want 3", f.Rank)
	}
}

func TestSVDShapes(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 2))
	for _, tc := range []struct{ rows, cols, wantMax int }{{10, 6, 6}, {6, 10, 6}, {1, 128, 1}, {128, 1, 1}, {1, 1, 1}} {
		t.Run(fmt.Sprintf("%dx%d", tc.rows, tc.cols), func(t *testing.T) {
			a := make([]float32, tc.rows*tc.cols)
			for i := range a {
				a[i] = float32(rng.NormFloat64())
			}
			f, err := SVD(a, tc.rows, tc.cols, SVDOptions{Rank: 32})
			if err != nil {
				t.Fatal(err)
			}
			if f.Rank != tc.wantMax {
				t.Errorf("%dx%d: rank %d, want %d", tc.rows, tc.cols, f.Rank, tc.wantMax)
			}
			if rel := svdError(a, f) / svdNorm(a); rel > 1e-6 {
				t.Errorf("%dx%d: full-rank factors have relative error %v", tc.rows, tc.cols, rel)
			}
			svdCheckOrthonormal(t, f, 1e-5)
		})
	}
	zero, err := SVD(make([]float32, 64*8), 64, 8, SVDOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if zero.Rank != 0 || len(zero.U) != 0 || len(zero.S) != 0 || len(zero.Vt) != 0 || zero.Validate() != nil {
		t.Errorf("zero matrix: %+v", zero)
	}
}

func TestSVDRejects(t *testing.T) {
	good := make([]float32, 12)
	good[0] = 1
	withNaN := slices.Clone(good)
	withNaN[5] = float32(math.NaN())
	withInf := slices.Clone(good)
	withInf[7] = float32(math.Inf(-1))
	for _, tc := range []struct {
		name       string
		a          []float32
		rows, cols int
		opts       SVDOptions
	}{
		{"nan", withNaN, 3, 4, SVDOptions{}},
		{"inf", withInf, 3, 4, SVDOptions{}},
		{"length", good, 3, 5, SVDOptions{}},
		{"no rows", nil, 0, 4, SVDOptions{}},
		{"no cols", nil, 3, 0, SVDOptions{}},
		{"negative", good, -3, -4, SVDOptions{}},
		{"max rank", good, 3, 4, SVDOptions{MaxRank: -1}},
		{"rank above max", good, 3, 4, SVDOptions{MaxRank: 4, Rank: 5}},
		{"energy", good, 3, 4, SVDOptions{Energy: 1.5}},
		{"nan energy", good, 3, 4, SVDOptions{Energy: math.NaN()}},
		{"power iterations", good, 3, 4, SVDOptions{PowerIters: 17}},
	} {
		if _, err := SVD(tc.a, tc.rows, tc.cols, tc.opts); !errors.Is(err, format.ErrInvalidArgument) {
			t.Errorf("%s: err %v, want ErrInvalidArgument", tc.name, err)
		}
	}
}

func TestSVDDeterministic(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	a := svdTestMatrix(rng, 150, 64, keyLikeSpectrum(64), 0.03)
	opts := SVDOptions{Rank: 20, Seed: 42}
	f1, _ := SVD(a, 150, 64, opts)
	f2, _ := SVD(a, 150, 64, opts)
	if !slices.Equal(f1.U, f2.U) || !slices.Equal(f1.S, f2.S) || !slices.Equal(f1.Vt, f2.Vt) {
		t.Fatal("same input and seed gave different factors")
	}
	for i := 0; i < f1.Rank; i++ {
		row := f1.Vt[i*64 : (i+1)*64]
		best := 0
		for j, v := range row {
			if math.Abs(float64(v)) > math.Abs(float64(row[best])) {
				best = j
			}
		}
		if row[best] < 0 {
			t.Errorf("component %d: largest Vt element %v is negative", i, row[best])
		}
	}
	// Another seed gives another sketch, equally good.
	f3, _ := SVD(a, 150, 64, SVDOptions{Rank: 20, Seed: 43})
	if slices.Equal(f1.Vt, f3.Vt) {
		t.Error("seed has no effect")
	}
	if opt := svdOptimalError(t, a, 150, 64, 20); svdError(a, f3) > 1.1*opt {
		t.Errorf("seed 43: error %v > 1.1 x %v", svdError(a, f3), opt)
	}
}

// TestSVDPowerIterations checks that power iterations improve a sketch
// that has none, on a spectrum where a plain sketch is visibly worse.
func TestSVDPowerIterations(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 8))
	a := svdTestMatrix(rng, 256, 96, keyLikeSpectrum(96), 0.01)
	opt := svdOptimalError(t, a, 256, 96, 32)
	plain, _ := SVD(a, 256, 96, SVDOptions{Rank: 32, PowerIters: -1})
	two, _ := SVD(a, 256, 96, SVDOptions{Rank: 32, PowerIters: 2})
	ep, e2 := svdError(a, plain)/opt, svdError(a, two)/opt
	if !(e2 < ep) || e2 > 1.05 {
		t.Errorf("error ratios: no power iterations %v, two %v", ep, e2)
	}
}

// TestSVDScaleInvariant checks that scaling the input by a power of two,
// large or small, scales the singular values alone: the sketch and the
// power iteration neither overflow nor underflow float32 on the way.
func TestSVDScaleInvariant(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	const rows, cols = 96, 64
	a := svdTestMatrix(rng, rows, cols, keyLikeSpectrum(cols), 0.03)
	ref, err := SVD(a, rows, cols, SVDOptions{Rank: 16})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range []int{-100, -60, 60, 100} {
		b := make([]float32, len(a))
		for i, v := range a {
			b[i] = float32(math.Ldexp(float64(v), e))
		}
		f, err := SVD(b, rows, cols, SVDOptions{Rank: 16})
		if err != nil {
			t.Fatal(err)
		}
		if f.Rank != ref.Rank {
			t.Fatalf("scale 2^%d: rank %d, want %d", e, f.Rank, ref.Rank)
		}
		for i := range f.S {
			if got := math.Ldexp(float64(f.S[i]), -e); math.Abs(got-float64(ref.S[i])) > 1e-5*float64(ref.S[0]) {
				t.Fatalf("scale 2^%d: sigma %d = %v, want %v", e, i, got, ref.S[i])
			}
		}
		svdCheckOrthonormal(t, f, 1e-5)
	}
}

// TestSVDIllConditioned runs the randomized path on spectra steep enough
// that the first power iteration's unorthonormalised basis is refused
// (condition number squared past 2^12) and orthonormalised after all, on
// both sides (rows <= cols and rows > cols), and checks that the result is
// as near optimal and as orthonormal as on an easy spectrum.
func TestSVDIllConditioned(t *testing.T) {
	for _, tc := range []struct{ rows, cols, q int }{{64, 128, 1}, {64, 128, 2}, {200, 64, 1}, {200, 64, 2}} {
		t.Run(fmt.Sprintf("%dx%d q%d", tc.rows, tc.cols, tc.q), func(t *testing.T) {
			n := min(tc.rows, tc.cols)
			sigma := make([]float64, n)
			for i := range sigma {
				sigma[i] = math.Pow(1e-8, float64(i)/float64(n-1)) // 1 down to 1e-8
			}
			rng := rand.New(rand.NewPCG(uint64(tc.rows), uint64(tc.q)))
			a := svdTestMatrix(rng, tc.rows, tc.cols, sigma, 0)
			f, err := SVD(a, tc.rows, tc.cols, SVDOptions{Rank: 16, PowerIters: tc.q})
			if err != nil {
				t.Fatal(err)
			}
			opt := svdOptimalError(t, a, tc.rows, tc.cols, 16)
			if got := svdError(a, f); got > 1.1*opt {
				t.Errorf("%dx%d q=%d: error %v > 1.1 x optimal %v", tc.rows, tc.cols, tc.q, got, opt)
			}
			svdCheckOrthonormal(t, f, 1e-5)
		})
	}
}

// TestSVDRowSign checks the sign rule on rows built to tie, to differ only
// in float64, to hold zeros of either sign, and on random rows, against a
// plain scan of the float32 row for its first largest magnitude.
func TestSVDRowSign(t *testing.T) {
	negZero := math.Copysign(0, -1)
	rows := [][]float64{
		{1, -2, 0.5},
		{-1, 2, -0.5},
		{2, -2},
		{-2, 2},
		{0.5, -0.5000000001}, // a tie only once rounded to float32
		{-0.5000000001, 0.5},
		{0, 0, 0},
		{negZero, 0},
		{0, negZero},
		{-3},
		{3},
	}
	rng := rand.New(rand.NewPCG(21, 22))
	for range 200 {
		row := make([]float64, 1+rng.IntN(40))
		for j := range row {
			row[j] = rng.NormFloat64() * math.Ldexp(1, rng.IntN(40)-20)
			if rng.IntN(4) == 0 {
				row[j] = float64(rng.IntN(5) - 2)
			}
		}
		rows = append(rows, row)
	}
	for _, row := range rows {
		want := make([]float32, len(row))
		for j, v := range row {
			want[j] = float32(v)
		}
		best := 0
		for j, v := range want {
			if math.Abs(float64(v)) > math.Abs(float64(want[best])) {
				best = j
			}
		}
		wantSign := float32(1)
		if math.Signbit(float64(want[best])) {
			wantSign = -1
		}
		for j := range want {
			want[j] *= wantSign
		}
		got := make([]float32, len(row))
		sign := svdRowSign(got, row)
		same := sign == wantSign
		for j := range got {
			same = same && math.Float32bits(got[j]) == math.Float32bits(want[j])
		}
		if !same {
			t.Errorf("%v: sign %v, row %v; want %v, %v", row, sign, got, wantSign, want)
		}
	}
}

// TestSVDTranspose checks the scaled transpose on shapes around its blocks
// of eight rows.
func TestSVDTranspose(t *testing.T) {
	for _, rows := range []int{1, 7, 8, 9, 16, 21} {
		for _, cols := range []int{1, 3, 8, 13} {
			a := make([]float32, rows*cols)
			for i := range a {
				a[i] = float32(i + 1)
			}
			at := make([]float32, rows*cols)
			svdTranspose(at, a, rows, cols, 0.25)
			for i := 0; i < rows; i++ {
				for j := 0; j < cols; j++ {
					if got, want := at[j*rows+i], a[i*cols+j]*0.25; got != want {
						t.Fatalf("%dx%d: at[%d][%d] = %v, want %v", rows, cols, j, i, got, want)
					}
				}
			}
		}
	}
}

func TestSVDAtScale(t *testing.T) {
	for _, tc := range []struct {
		norm float64
		want float32
	}{
		{1, 0.5}, {0.75, 1}, {3, 0.25}, {1024, 0x1p-11},
		{1e-45, 0x1p127}, {1e45, 0x1p-126},
	} {
		if got := atScale(tc.norm); got != tc.want {
			t.Errorf("atScale(%v) = %v, want %v", tc.norm, got, tc.want)
		}
	}
}

// TestWideCheaper pins where SVD switches range finders: the cost model's
// break-even (98 rows of 128 dims for k = 40), every wide span of 64 dims,
// and never a tall one.
func TestWideCheaper(t *testing.T) {
	for _, c := range []struct {
		rows, cols, k int
		want          bool
	}{
		{64, 128, 40, true}, {97, 128, 40, true}, {98, 128, 40, false}, {128, 128, 40, false},
		{64, 64, 40, true}, {41, 64, 40, true}, {129, 128, 40, false}, {512, 128, 40, false},
	} {
		if got := wideCheaper(c.rows, c.cols, c.k); got != c.want {
			t.Errorf("wideCheaper(%d, %d, %d) = %v, want %v", c.rows, c.cols, c.k, got, c.want)
		}
	}
}

// TestSVDSweep runs SVD over shapes on both sides of every path switch
// (exact when k reaches min(rows, cols), the wide range finder below its
// break-even, the tall one above it), four spectra (key-like, flat,
// exactly rank 5, geometric) plus noise, and ranks 1 to 32: the error is
// within 1.1x the optimal rank-r error (plus float32 noise) and the
// factors orthonormal. It is the net for the eigensolver's fast path and
// its fallback as much as for the range finders.
func TestSVDSweep(t *testing.T) {
	rng := rand.New(rand.NewPCG(99, 1))
	for _, rows := range []int{1, 3, 8, 33, 41, 64, 97, 98, 129, 200} {
		for _, cols := range []int{1, 8, 64, 128} {
			for _, spec := range []string{"key", "flat", "rank5", "geometric"} {
				m := min(rows, cols)
				sig := make([]float64, m)
				for i := range sig {
					switch spec {
					case "key":
						sig[i] = 40 / float64(i+1)
					case "flat":
						sig[i] = 3 + 0.01*float64(i)
					case "rank5":
						if i < 5 {
							sig[i] = 10
						}
					case "geometric":
						sig[i] = math.Pow(0.5, float64(i))
					}
				}
				a := svdTestMatrix(rng, rows, cols, sig, 1e-3)
				norm := math.Sqrt(sumSquaresF32(a))
				for _, r := range []int{1, 16, 32} {
					f, err := SVD(a, rows, cols, SVDOptions{Rank: r})
					if err != nil {
						t.Fatal(err)
					}
					opt := svdOptimalError(t, a, rows, cols, r)
					if got := svdError(a, f); got > 1.1*opt+1e-5*norm {
						t.Errorf("%dx%d %s rank %d: error %v, optimal %v", rows, cols, spec, r, got, opt)
					}
					svdCheckOrthonormal(t, f, 1e-5)
				}
			}
		}
	}
}

// svdLoadF32 reads testdata/name, rows*cols little-endian float32.
func svdLoadF32(t *testing.T, name string, rows, cols int) []float32 {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != 4*rows*cols {
		t.Fatalf("%s: %d bytes, want %d for %dx%d float32", name, len(b), 4*rows*cols, rows, cols)
	}
	a := make([]float32, rows*cols)
	for i := range a {
		a[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return a
}

// svdCheckFull checks factors of a at every rank SVD may keep (Energy 1,
// up to 32): no error, S descending and non-negative, f valid, the error
// within 1.1x the optimal error of its rank plus float32 noise (1e-5
// ||A||), the factors orthonormal to 1e-5 and the rank at most want (the
// numerical rank, or min(rows, cols, 32)).
func svdCheckFull(t *testing.T, a []float32, rows, cols, want int) *Factors {
	t.Helper()
	f, err := SVD(a, rows, cols, SVDOptions{Energy: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Validate(); err != nil {
		t.Fatal(err)
	}
	if f.Rank > want {
		t.Errorf("rank %d, want at most %d", f.Rank, want)
	}
	for i := 1; i < f.Rank; i++ {
		if f.S[i] > f.S[i-1] || f.S[i] < 0 {
			t.Fatalf("singular values not descending: %v", f.S)
		}
	}
	norm := svdNorm(a)
	opt := svdOptimalError(t, a, rows, cols, f.Rank)
	if got := svdError(a, f); got > 1.1*opt+1e-5*norm {
		t.Errorf("rank %d: error %v, optimal %v (||A|| %v)", f.Rank, got, opt, norm)
	}
	svdCheckOrthonormal(t, f, 1e-5)
	return f
}

// TestSVDRepeatedRows: spans whose rows repeat (values of layer 0, a
// function of the token alone) have Gram matrices with a block of zero
// eigenvalues, on which the QL iteration's relative deflation test alone
// never converged. The fixture is such a span of gocode-2k (see
// testdata/README.md); the generated ones repeat a few random rows, on
// every path of SVD: the exact one, wide and tall range finders.
func TestSVDRepeatedRows(t *testing.T) {
	t.Run("fixture 25x64", func(t *testing.T) {
		a := svdLoadF32(t, "values-layer0-25x64.f32", 25, 64)
		f := svdCheckFull(t, a, 25, 64, 11) // 11 distinct rows
		if f.Rank < 10 {
			t.Errorf("rank %d of 11 distinct rows", f.Rank)
		}
		g, err := SVD(a, 25, 64, SVDOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := g.Validate(); err != nil {
			t.Fatal(err)
		}
	})
	rng := rand.New(rand.NewPCG(31, 7))
	for _, tc := range []struct {
		rows, cols, distinct int
		run                  bool
	}{
		{21, 64, 10, true}, {25, 64, 11, true}, {31, 64, 13, true}, {34, 64, 5, true}, {40, 64, 12, true},
		{25, 128, 8, true}, {64, 128, 20, true}, {96, 128, 9, true}, {200, 64, 17, true}, {300, 128, 40, true},
		{25, 64, 11, false}, {40, 64, 12, false}, {64, 128, 20, false}, {200, 64, 17, false}, {48, 16, 3, false},
	} {
		name := fmt.Sprintf("%dx%d of %d rows", tc.rows, tc.cols, tc.distinct)
		if tc.run {
			name += ", the last repeated"
		}
		t.Run(name, func(t *testing.T) {
			a := svdRepeatedRows(rng, tc.rows, tc.cols, tc.distinct, tc.run)
			svdCheckFull(t, a, tc.rows, tc.cols, min(tc.distinct, tc.cols, 32))
		})
	}
}

// svdRepeatedRows returns a rows x cols matrix of distinct random rows,
// each row past them a copy of one: with run, the last one, as a span
// ending in a run of one token (indentation) has; otherwise random ones,
// the rows shuffled.
func svdRepeatedRows(rng *rand.Rand, rows, cols, distinct int, run bool) []float32 {
	a := make([]float32, rows*cols)
	for i := range a[:distinct*cols] {
		a[i] = float32(rng.NormFloat64())
	}
	for r := distinct; r < rows; r++ {
		src := distinct - 1
		if !run {
			src = rng.IntN(distinct)
		}
		copy(a[r*cols:(r+1)*cols], a[src*cols:(src+1)*cols])
	}
	if !run {
		rng.Shuffle(rows, func(i, j int) {
			for c := range cols {
				a[i*cols+c], a[j*cols+c] = a[j*cols+c], a[i*cols+c]
			}
		})
	}
	return a
}

// TestSVDAdversarial runs SVD on matrices built to stress the small
// eigensolver: repeated singular values, rank deficiency, zero columns and
// rows, a single non-zero element, and scales near float32's limits.
func TestSVDAdversarial(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 3))
	gauss := func(rows, cols int) []float32 {
		a := make([]float32, rows*cols)
		for i := range a {
			a[i] = float32(rng.NormFloat64())
		}
		return a
	}
	scaled := func(a []float32, e int) []float32 {
		out := make([]float32, len(a))
		for i, v := range a {
			out[i] = float32(math.Ldexp(float64(v), e))
		}
		return out
	}
	flat := func(n int, s float64) []float64 {
		out := make([]float64, n)
		for i := range out {
			out[i] = s
		}
		return out
	}
	type tc struct {
		name             string
		a                []float32
		rows, cols, want int
	}
	var cases []tc
	for _, sh := range []struct{ rows, cols int }{{25, 64}, {40, 64}, {64, 128}, {200, 64}, {12, 10}} {
		m := min(sh.rows, sh.cols)
		name := fmt.Sprintf("%dx%d", sh.rows, sh.cols)
		cases = append(cases,
			tc{name + " equal sigmas", svdTestMatrix(rng, sh.rows, sh.cols, flat(m, 3), 0), sh.rows, sh.cols, min(m, 32)},
			tc{name + " two plateaus", svdTestMatrix(rng, sh.rows, sh.cols, append(flat(m/2, 5), flat(m-m/2, 1)...), 0), sh.rows, sh.cols, min(m, 32)},
			tc{name + " rank 3", svdTestMatrix(rng, sh.rows, sh.cols, []float64{4, 2, 1}, 0), sh.rows, sh.cols, 3},
			tc{name + " rank 1", svdTestMatrix(rng, sh.rows, sh.cols, []float64{7}, 0), sh.rows, sh.cols, 1},
			tc{name + " plateau then zero", svdTestMatrix(rng, sh.rows, sh.cols, flat(m/3, 2), 0), sh.rows, sh.cols, m / 3},
		)
		z := gauss(sh.rows, sh.cols)
		for r := range sh.rows {
			for c := 0; c < sh.cols; c += 2 {
				z[r*sh.cols+c] = 0 // every other column
			}
		}
		cases = append(cases, tc{name + " zero columns", z, sh.rows, sh.cols, min(sh.rows, (sh.cols+1)/2, 32)})
		zr := gauss(sh.rows, sh.cols)
		for r := 1; r < sh.rows; r++ {
			if r%3 != 0 {
				clear(zr[r*sh.cols : (r+1)*sh.cols])
			}
		}
		cases = append(cases, tc{name + " zero rows", zr, sh.rows, sh.cols, min((sh.rows+2)/3, sh.cols, 32)})
		one := make([]float32, sh.rows*sh.cols)
		one[(sh.rows/2)*sh.cols+sh.cols/3] = -2.5
		cases = append(cases, tc{name + " one element", one, sh.rows, sh.cols, 1})
		same := make([]float32, sh.rows*sh.cols)
		row := gauss(1, sh.cols)
		for r := range sh.rows {
			copy(same[r*sh.cols:], row)
		}
		cases = append(cases, tc{name + " all rows equal", same, sh.rows, sh.cols, 1})
		key := svdTestMatrix(rng, sh.rows, sh.cols, keyLikeSpectrum(m), 0.03)
		for _, e := range []int{-120, -90, 90, 120} {
			cases = append(cases, tc{fmt.Sprintf("%s key-like x 2^%d", name, e), scaled(key, e), sh.rows, sh.cols, min(m, 32)})
		}
		cases = append(cases, tc{name + " rank 3 x 2^-120", scaled(svdTestMatrix(rng, sh.rows, sh.cols, []float64{4, 2, 1}, 0), -120), sh.rows, sh.cols, 3})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			svdCheckFull(t, c.a, c.rows, c.cols, c.want)
		})
	}
}
