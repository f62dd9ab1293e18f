package reconstruct

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/lapack"
	"gonum.org/v1/gonum/lapack/lapack64"
)

// eigenTestMatrix returns Q diag(lam) Q^T for a random orthogonal Q.
func eigenTestMatrix(rng *rand.Rand, lam []float64) []float64 {
	n := len(lam)
	q := svdRandomOrthonormal(rng, n, n)
	a := make([]float64, n*n)
	for i := 0; i < n; i++ {
		for j := 0; j < n; j++ {
			var s float64
			for p, l := range lam {
				s += q.At(i, p) * l * q.At(j, p)
			}
			a[i*n+j] = s
		}
	}
	for i := 0; i < n; i++ { // exactly symmetric
		for j := 0; j < i; j++ {
			a[i*n+j] = a[j*n+i]
		}
	}
	return a
}

// checkEigen checks vals against LAPACK's dsyev (the first r to 1e-13,
// the others to rest) and the r vectors for orthonormality (to orth) and
// residual ||A v - lambda v||, all relative to ||A||.
func checkEigen(t *testing.T, name string, a []float64, n, r int, orth, rest float64, sym func(a []float64, n int, vals, vecs []float64, r int) bool) {
	t.Helper()
	work := slices.Clone(a)
	vals := make([]float64, n)
	vecs := make([]float64, r*n)
	if !sym(work, n, vals, vecs, r) {
		t.Fatalf("%s: did not converge", name)
	}
	ref := slices.Clone(a)
	want := make([]float64, n)
	g := blas64.Symmetric{N: n, Stride: max(n, 1), Uplo: blas.Upper, Data: ref}
	lwork := []float64{0}
	lapack64.Syev(lapack.EVNone, g, want, lwork, -1)
	lw := make([]float64, max(int(lwork[0]), 1))
	if n > 0 && !lapack64.Syev(lapack.EVNone, g, want, lw, len(lw)) {
		t.Fatal("dsyev failed")
	}
	slices.Reverse(want)
	var norm float64
	for _, v := range want {
		norm = max(norm, math.Abs(v))
	}
	for i := range vals {
		tol := 1e-13 * max(norm, 1e-300)
		if i >= r {
			tol = rest * max(norm, 1e-300)
		}
		if math.Abs(vals[i]-want[i]) > tol {
			t.Fatalf("%s: eigenvalue %d = %v, dsyev %v", name, i, vals[i], want[i])
		}
		if i > 0 && vals[i] > vals[i-1] {
			t.Fatalf("%s: eigenvalues not decreasing: %v", name, vals)
		}
	}
	for i := 0; i < r; i++ {
		vi := vecs[i*n : (i+1)*n]
		for j := 0; j <= i; j++ {
			d := dotRow(vi, vecs[j*n:(j+1)*n])
			if i == j {
				d--
			}
			if math.Abs(d) > orth {
				t.Fatalf("%s: v%d.v%d off by %v", name, i, j, d)
			}
		}
		for p := 0; p < n; p++ {
			res := -vals[i] * vi[p]
			for q := 0; q < n; q++ {
				res += a[p*n+q] * vi[q]
			}
			if math.Abs(res) > 1e-12*max(norm, 1e-300) {
				t.Fatalf("%s: vector %d residual %v (||A|| %v)", name, i, res, norm)
			}
		}
	}
}

func TestEigenSym(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 1))
	type tc struct {
		name string
		lam  []float64
	}
	var cases []tc
	for _, n := range []int{1, 2, 3, 4, 7, 40} {
		lam := make([]float64, n)
		for i := range lam {
			lam[i] = rng.NormFloat64() * 5
		}
		cases = append(cases, tc{"random", lam})
	}
	graded := make([]float64, 40)
	for i := range graded {
		graded[i] = 1600 / float64((i+1)*(i+1)) // a Gram matrix of a key-like span
	}
	cases = append(cases, tc{"graded", graded})
	clustered := make([]float64, 24)
	for i := range clustered {
		clustered[i] = 3 + float64(i%3)*1e-13 // three tight clusters of eight
		if i%3 == 2 {
			clustered[i] = -1
		}
	}
	cases = append(cases, tc{"clustered", clustered})
	repeated := make([]float64, 12)
	for i := range repeated {
		repeated[i] = 2
	}
	repeated[0], repeated[11] = 5, 0
	cases = append(cases, tc{"repeated", repeated})
	cases = append(cases, tc{"zero", make([]float64, 5)})
	// A Gram matrix of a span whose rows repeat: a block of zero
	// eigenvalues, which rounding leaves at about 2^-53 ||A||.
	null := make([]float64, 25)
	copy(null, []float64{9, 4, 2, 1, 0.5})
	cases = append(cases, tc{"null block", null}, tc{"gram of a run", null})
	// The fast path where it is expected: where the wanted eigenvalues
	// are apart from the others (no vector wanted at all, or only the
	// isolated top one of repeated); the QL iteration for vectors of
	// clusters and repeats, and for the zero matrix.
	wantFast := func(name string, r int) bool {
		switch name {
		case "random", "graded":
			return true
		case "repeated", "null block", "gram of a run":
			return r <= 1
		case "zero":
			return false
		}
		return r == 0
	}
	for _, c := range cases {
		n := len(c.lam)
		a := eigenTestMatrix(rng, c.lam)
		if c.name == "gram of a run" {
			// The Gram matrix of a span ending in 21 copies of one row:
			// its null block is exactly structured, not rotated noise.
			n = 25
			b := svdRepeatedRows(rng, n, 64, 5, true)
			a = make([]float64, n*n)
			gramF32(a, b, n, 64)
		}
		for _, r := range []int{0, 1, n} {
			var w eigenWork
			checkEigen(t, c.name, a, n, r, 0x1p-29, 0x1p-28, w.sym)
			if want := wantFast(c.name, r); w.fast != want {
				t.Errorf("%s n=%d r=%d: fast path %v, want %v", c.name, n, r, w.fast, want)
			}
			ql := func(a []float64, n int, vals, vecs []float64, r int) bool {
				return w.decompose(a, n, vals, vecs, r, false)
			}
			checkEigen(t, c.name+" (QL)", a, n, r, 1e-12, 1e-13, ql)
			if w.fast {
				t.Errorf("%s: decompose without the fast path took it", c.name)
			}
		}
	}
	// A diagonal matrix is already tridiagonal: no reflector at all, and
	// a zero pivot for the fast path, which gives way.
	var w eigenWork
	checkEigen(t, "diagonal", []float64{1, 0, 0, 0, 3, 0, 0, 0, 2}, 3, 3, 1e-12, 1e-13, w.sym)
	if w.fast {
		t.Error("diagonal: took the fast path")
	}
}
