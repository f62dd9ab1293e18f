package reconstruct

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestEigenKernels checks the row kernels (the AVX2 ones where the CPU has
// them) bit for bit against their portable loops, and the portable loops
// against plain float64 arithmetic, over lengths with every tail and
// strides wider than rows.
func TestEigenKernels(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 7))
	fill := func(n int) []float64 {
		x := make([]float64, n)
		for i := range x {
			x[i] = rng.NormFloat64()
		}
		return x
	}
	same := func(name string, m, n int, got, want []float64) {
		t.Helper()
		for i := range got {
			if math.Float64bits(got[i]) != math.Float64bits(want[i]) {
				t.Fatalf("%s %dx%d: element %d = %v, portable %v", name, m, n, i, got[i], want[i])
			}
		}
	}
	for _, m := range []int{0, 1, 3, 4, 5, 13} {
		for _, n := range []int{0, 1, 2, 3, 4, 5, 8, 11, 16, 21, 40} {
			lda := n + 3
			a := fill(max(m*lda, 1))
			x, y, u, v := fill(max(m, n)), fill(max(m, n)), fill(n), fill(n)

			got, want := slices.Clone(a), slices.Clone(a)
			ger(got, lda, m, n, x, u)
			gerGo(want, lda, m, n, x, u)
			same("ger", m, n, got, want)
			for i := 0; i < m; i++ {
				for l := 0; l < n; l++ {
					if d := want[i*lda+l] - (a[i*lda+l] - x[i]*u[l]); math.Abs(d) > 1e-14 {
						t.Fatalf("ger %dx%d (%d,%d) off by %v", m, n, i, l, d)
					}
				}
			}

			got, want = slices.Clone(a), slices.Clone(a)
			ger2(got, lda, m, n, x, u, y, v)
			ger2Go(want, lda, m, n, x, u, y, v)
			same("ger2", m, n, got, want)

			gy, wy := fill(max(m, 1)), fill(max(m, 1))
			gemv(gy, a, lda, m, n, v)
			gemvGo(wy, a, lda, m, n, v)
			same("gemv", m, n, gy[:m], wy[:m])
			for i := 0; i < m; i++ {
				var s float64
				for l := 0; l < n; l++ {
					s += a[i*lda+l] * v[l]
				}
				if math.Abs(wy[i]-s) > 1e-13 {
					t.Fatalf("gemv %dx%d row %d = %v, sum %v", m, n, i, wy[i], s)
				}
			}

			gt, wt := fill(max(n, 1)), fill(max(n, 1))
			gemvT(gt, a, lda, m, n, x)
			gemvTGo(wt, a, lda, m, n, x, 0)
			same("gemvT", m, n, gt[:n], wt[:n])
			for l := 0; l < n; l++ {
				var s float64
				for i := 0; i < m; i++ {
					s += a[i*lda+l] * x[i]
				}
				if math.Abs(wt[l]-s) > 1e-13 {
					t.Fatalf("gemvT %dx%d column %d = %v, sum %v", m, n, l, wt[l], s)
				}
			}

			if m == n {
				got, want = slices.Clone(a), slices.Clone(a)
				syr(got, lda, m, x)
				syrGo(want, lda, m, x)
				same("syr", m, n, got, want)
				for i := 0; i < m; i++ {
					for l := 0; l < i; l++ {
						if want[i*lda+l] != a[i*lda+l] {
							t.Fatalf("syr %d: wrote below the diagonal at (%d,%d)", m, i, l)
						}
					}
				}
			}

			c, s := math.Cos(0.3), math.Sin(0.3)
			gx, gz := slices.Clone(u), slices.Clone(v)
			wx, wz := slices.Clone(u), slices.Clone(v)
			rot(gx, gz, c, s)
			rotGo(wx, wz, c, s)
			same("rot x", 1, n, gx, wx)
			same("rot y", 1, n, gz, wz)
			for l := range wx {
				if d := wx[l] - (c*u[l] - s*v[l]); math.Abs(d) > 1e-15 {
					t.Fatalf("rot %d: element %d off by %v", n, l, d)
				}
			}
		}
	}
}

func TestEigenKernelsPanicOnShortSlices(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("no panic")
		}
	}()
	ger(make([]float64, 7), 4, 2, 4, make([]float64, 2), make([]float64, 4))
}
