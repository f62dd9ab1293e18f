package reconstruct

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"gonum.org/v1/gonum/lapack/gonum"
)

// TestRootFreeQL checks rootFreeQL against LAPACK's dsterf (gonum's port)
// on tridiagonals of every small size, graded ones, ones that split (zero
// off-diagonal elements) and ones whose last block is 2 x 2.
func TestRootFreeQL(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 3))
	type tc struct {
		name string
		d, e []float64
	}
	var cases []tc
	for n := 1; n <= 9; n++ {
		d, e := make([]float64, n), make([]float64, n)
		for i := range d {
			d[i] = rng.NormFloat64()
			if i+1 < n {
				e[i] = rng.NormFloat64()
			}
		}
		cases = append(cases, tc{"random", d, e})
	}
	graded, ge := make([]float64, 40), make([]float64, 40)
	for i := range graded {
		graded[i] = 1 / float64((i+1)*(i+1))
		if i+1 < 40 {
			ge[i] = 0.3 / float64((i+1)*(i+2))
		}
	}
	cases = append(cases, tc{"graded", graded, ge})
	split := []float64{2, -1, 3, 0.5, 4, 1}
	cases = append(cases, tc{"split", slices.Clone(split), []float64{0.7, 0, 0.2, 0, 0.9, 0}})
	cases = append(cases, tc{"2x2 tail", []float64{1, 5, 5, 1}, []float64{0, 1e-3, 0, 0}})
	// The shift from the top 2 x 2 is -1 = d[2]: gamma and p start at
	// exactly 0, dsterf's special case (dsterfSweep).
	cases = append(cases, tc{"zero p", []float64{0, 0, -1}, []float64{1, 0.5, 0}})
	// The tridiagonal of the Gram matrix of a span ending in a run of one
	// row: a block of zero eigenvalues (see eigenWork.ql).
	{
		const n = 25
		g := make([]float64, n*n)
		gramF32(g, svdRepeatedRows(rng, n, 64, 5, true), n, 64)
		var w eigenWork
		w.d, w.e, w.tau, w.tmp = make([]float64, n), make([]float64, n), make([]float64, n), make([]float64, n)
		w.tridiagonalize(g, n)
		cases = append(cases, tc{"null block", w.d, w.e})
	}
	for _, c := range cases {
		n := len(c.d)
		e2 := make([]float64, n)
		for i := 0; i < n-1; i++ {
			e2[i] = c.e[i] * c.e[i]
		}
		got := slices.Clone(c.d)
		if !rootFreeQL(got, e2, 0x1p-53) {
			t.Fatalf("%s n=%d: did not converge", c.name, n)
		}
		want := slices.Clone(c.d)
		if !(gonum.Implementation{}).Dsterf(n, want, slices.Clone(c.e[:max(n-1, 0)])) {
			t.Fatal("dsterf failed")
		}
		slices.Sort(got)
		var norm float64
		for _, v := range want {
			norm = max(norm, math.Abs(v))
		}
		for i := range got {
			if math.Abs(got[i]-want[i]) > 1e-14*norm {
				t.Fatalf("%s n=%d: eigenvalue %d = %v, dsterf %v", c.name, n, i, got[i], want[i])
			}
		}
	}
}

// TestSym2x2 checks sym2x2 against the characteristic polynomial, the
// larger magnitude first, including the cancelling cases.
func TestSym2x2(t *testing.T) {
	for _, c := range [][3]float64{{1, 0, 1}, {2, 1, 2}, {1e8, 1, 1e-8}, {-3, 2, 1}, {0, 1, 0}, {1, 1e-9, -1}, {-1, 0.5, -1}} {
		a, b, d := c[0], c[1], c[2]
		rt1, rt2 := sym2x2(a, b, d)
		if math.Abs(rt1) < math.Abs(rt2) {
			t.Fatalf("%v: %v before %v", c, rt1, rt2)
		}
		scale := math.Abs(a) + math.Abs(b) + math.Abs(d)
		if s := rt1 + rt2; math.Abs(s-(a+d)) > 1e-15*scale {
			t.Fatalf("%v: sum %v, trace %v", c, s, a+d)
		}
		if p := rt1 * rt2; math.Abs(p-(a*d-b*b)) > 1e-15*scale*scale {
			t.Fatalf("%v: product %v, determinant %v", c, p, a*d-b*b)
		}
	}
}

// TestTwistedMatchesQL checks that where the fast path is taken its
// vectors are those of the QL iteration (up to sign) to within the angle
// it promises, and that eigenvalues apart by less than that promise can
// send it to the QL iteration, which still gets them right.
func TestTwistedMatchesQL(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 9))
	close := make([]float64, 20)
	for i := range close {
		close[i] = 10 / float64(i+1)
	}
	close[1] = close[0] * (1 - 1e-9) // the top two apart by 1e-8 of ||A||
	for _, c := range []struct {
		name     string
		lam      []float64
		wantFast bool
	}{
		{"graded", keyLikeGram(40), true},
		{"random", randomSpectrum(rng, 33), true},
		{"close pair", close, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			n := len(c.lam)
			a := eigenTestMatrix(rng, c.lam)
			var fast, ql eigenWork
			fv, fw := make([]float64, n), make([]float64, n*n)
			qv, qw := make([]float64, n), make([]float64, n*n)
			if !fast.sym(slices.Clone(a), n, fv, fw, n) || !ql.decompose(slices.Clone(a), n, qv, qw, n, false) {
				t.Fatalf("%s: did not converge", c.name)
			}
			if fast.fast != c.wantFast {
				t.Fatalf("%s: fast path %v, want %v", c.name, fast.fast, c.wantFast)
			}
			if !fast.fast {
				checkEigen(t, c.name, a, n, n, 1e-12, 1e-13, fast.sym)
				return
			}
			for i := 0; i < n; i++ {
				if math.Abs(fv[i]-qv[i]) > 1e-13*math.Abs(qv[0]) {
					t.Fatalf("%s: eigenvalue %d = %v, QL %v", c.name, i, fv[i], qv[i])
				}
				f, q := fw[i*n:(i+1)*n], qw[i*n:(i+1)*n]
				sign := math.Copysign(1, dotRow(f, q))
				var dist float64
				for p := range f {
					dist += (f[p] - sign*q[p]) * (f[p] - sign*q[p])
				}
				// Both within their angle of the exact vector: 2^-30 and
				// QL's 2^-53 ||A|| / gap.
				if math.Sqrt(dist) > 0x1p-29 {
					t.Fatalf("%s: vector %d %v from QL's", c.name, i, math.Sqrt(dist))
				}
			}
		})
	}
}

// keyLikeGram is the spectrum of the Gram matrix of a key-like span.
func keyLikeGram(n int) []float64 {
	s := keyLikeSpectrum(n)
	for i := range s {
		s[i] *= s[i]
	}
	return s
}

func randomSpectrum(rng *rand.Rand, n int) []float64 {
	lam := make([]float64, n)
	for i := range lam {
		lam[i] = rng.NormFloat64() * 3
	}
	return lam
}

// TestPivotsKernel checks the pivots of eigenPivotsFast (where the CPU has
// AVX2) bit for bit against pivotsGo, and pivotsGo against the recurrence
// in plain arithmetic, including a zero pivot.
func TestPivotsKernel(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	for _, n := range []int{1, 2, 3, 5, 40} {
		for _, zero := range []bool{false, true} {
			d, esq := make([]float64, n), make([]float64, n)
			for i := range d {
				d[i] = rng.NormFloat64()
				if i+1 < n {
					esq[i] = math.Pow(rng.NormFloat64(), 2)
				}
			}
			var lam [8]float64
			for q := range lam {
				lam[q] = rng.NormFloat64()
			}
			if zero {
				lam[5] = d[0] // dp[0] = 0 for lane 5
			}
			bufs := func() [4][]float64 {
				return [4][]float64{make([]float64, 8*n), make([]float64, 8*n), make([]float64, 8*n), make([]float64, 8*n)}
			}
			g, want := bufs(), bufs()
			wantSmall := pivotsGo(d, esq, &lam, n, want[0], want[1], want[2], want[3])
			if small, ok := eigenPivotsFast(d, esq, &lam, n, g[0], g[1], g[2], g[3]); ok {
				if math.Float64bits(small) != math.Float64bits(wantSmall) {
					t.Fatalf("n=%d zero=%v: smallest pivot %v, portable %v", n, zero, small, wantSmall)
				}
				for b := range g {
					for i := range g[b] {
						if math.Float64bits(g[b][i]) != math.Float64bits(want[b][i]) {
							t.Fatalf("n=%d: array %d element %d = %v, portable %v", n, b, i, g[b][i], want[b][i])
						}
					}
				}
			}
			if zero && n > 1 && wantSmall != 0 {
				t.Fatalf("n=%d: zero pivot not reported (%v)", n, wantSmall)
			}
			if !zero && !(wantSmall > 0) {
				t.Fatalf("n=%d: smallest pivot %v", n, wantSmall)
			}
			for q, l := range lam {
				p, m := d[0]-l, d[n-1]-l
				for i := 1; i < n; i++ {
					p = (d[i] - l) - esq[i-1]/p
				}
				for j := n - 2; j >= 0; j-- {
					m = (d[j] - l) - esq[j]/m
				}
				if zero && q == 5 {
					continue
				}
				if math.Abs(p-want[0][(n-1)*8+q]) > 1e-9*math.Abs(p) || math.Abs(m-want[2][q]) > 1e-9*math.Abs(m) {
					t.Fatalf("n=%d lane %d: last pivots %v %v, recurrence %v %v", n, q, want[0][(n-1)*8+q], want[2][q], p, m)
				}
			}
		}
	}
}
