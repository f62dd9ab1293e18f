package reconstruct

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestMatmulF32 checks the dispatching matmul (SIMD where the CPU has it)
// against the portable loop bit for bit, and both against float64, over
// shapes that exercise every kernel and tail, with strides wider than rows.
func TestMatmulF32(t *testing.T) {
	rng := rand.New(rand.NewPCG(6, 6))
	fill := func(n int) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(rng.NormFloat64())
		}
		return x
	}
	for _, m := range []int{1, 3, 4, 9} {
		for _, n := range []int{1, 7, 8, 9, 15, 16, 17, 24, 31, 41, 48, 130} {
			for _, k := range []int{0, 1, 5, 40} {
				lda, ldb, ldc := k+3, n+5, n+2
				a, b := fill(m*lda), fill(max(k, 1)*ldb)
				got := fill(m * ldc)
				want := slices.Clone(got)
				matmulF32(got, ldc, a, lda, b, ldb, m, n, k)
				matmulF32Generic(want, ldc, a, lda, b, ldb, m, n, k)
				for i := 0; i < m; i++ {
					for j := 0; j < n; j++ {
						g, w := got[i*ldc+j], want[i*ldc+j]
						if math.Float32bits(g) != math.Float32bits(w) {
							t.Fatalf("%dx%dx%d: (%d,%d) = %v, portable %v", m, n, k, i, j, g, w)
						}
						var exact, mag float64
						for l := 0; l < k; l++ {
							p := float64(a[i*lda+l]) * float64(b[l*ldb+j])
							exact += p
							mag += math.Abs(p)
						}
						if math.Abs(float64(g)-exact) > 1e-6*mag {
							t.Fatalf("%dx%dx%d: (%d,%d) = %v, exact %v", m, n, k, i, j, g, exact)
						}
					}
					// Padding between rows is left alone.
					if i+1 < m && got[i*ldc+n] != want[i*ldc+n] {
						t.Fatalf("%dx%dx%d: wrote past row %d", m, n, k, i)
					}
				}
			}
		}
	}
}

func TestMatmulF32PanicsOnShortSlices(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("no panic")
		}
	}()
	matmulF32(make([]float32, 15), 16, make([]float32, 4), 4, make([]float32, 64), 16, 1, 16, 4)
}
