package reconstruct

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestDot checks dotF32 (the AVX2 kernel where the CPU has one) bit for
// bit against the portable definition, and against a plain float64 sum,
// over shapes that exercise the tiles and every tail, with strides wider
// than rows.
func TestDot(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 9))
	for _, m := range []int{1, 3, 4, 5, 8, 41} {
		for _, n := range []int{1, 2, 3, 4, 40} {
			for _, k := range []int{0, 1, 3, 4, 7, 8, 64, 130} {
				lda, ldb, ldc := k+3, k+1, n+2
				a32 := make([]float32, max(m*lda, 1))
				b32 := make([]float32, max(n*ldb, 1))
				for i := range a32 {
					a32[i] = float32(rng.NormFloat64())
				}
				for i := range b32 {
					b32[i] = float32(rng.NormFloat64())
				}
				c := make([]float64, m*ldc)
				for i := range c {
					c[i] = -7
				}
				dotF32(c, ldc, a32, lda, b32, ldb, m, n, k)
				k4 := k &^ 3
				for i := 0; i < m; i++ {
					for j := 0; j < n; j++ {
						a, b := a32[i*lda:i*lda+k], b32[j*ldb:j*ldb+k]
						if g, w := c[i*ldc+j], dotTail32(dotLanes32(a, b, k4), a, b, k4); math.Float64bits(g) != math.Float64bits(w) {
							t.Fatalf("%dx%dx%d (%d,%d) = %v, portable %v", m, n, k, i, j, g, w)
						}
						var exact, mag float64
						for l := 0; l < k; l++ {
							p := float64(a[l]) * float64(b[l])
							exact += p
							mag += math.Abs(p)
						}
						if math.Abs(c[i*ldc+j]-exact) > 1e-14*mag {
							t.Fatalf("%dx%dx%d (%d,%d) = %v, sum %v", m, n, k, i, j, c[i*ldc+j], exact)
						}
					}
					if n < ldc && c[i*ldc+n] != -7 {
						t.Fatalf("%dx%dx%d: wrote past row %d", m, n, k, i)
					}
				}
			}
		}
	}
}

func TestGramF32Symmetric(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 9))
	const k, n = 13, 37
	m := make([]float32, k*n)
	for i := range m {
		m[i] = float32(rng.NormFloat64())
	}
	g := make([]float64, k*k)
	gramF32(g, m, k, n)
	for i := 0; i < k; i++ {
		for j := 0; j < k; j++ {
			if g[i*k+j] != g[j*k+i] {
				t.Fatalf("g[%d][%d] = %v, g[%d][%d] = %v", i, j, g[i*k+j], j, i, g[j*k+i])
			}
		}
	}
}

func TestDotPanicsOnShortSlices(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("no panic")
		}
	}()
	dotF32(make([]float64, 3), 2, make([]float32, 8), 4, make([]float32, 8), 4, 2, 2, 4)
}

// TestMulF64F32 checks mulF64F32 (the AVX2 kernel where the CPU has one)
// bit for bit against its definition over shapes with every tail.
func TestMulF64F32(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 9))
	for _, m := range []int{1, 3, 4, 9} {
		for _, n := range []int{1, 7, 8, 17, 40} {
			for _, k := range []int{0, 1, 5, 40} {
				lda, ldb, ldc := k+1, n+3, n+2
				a := make([]float64, m*lda)
				b := make([]float32, max(k, 1)*ldb)
				for i := range a {
					a[i] = rng.NormFloat64()
				}
				for i := range b {
					b[i] = float32(rng.NormFloat64())
				}
				c := make([]float64, m*ldc)
				for i := range c {
					c[i] = -7
				}
				mulF64F32(c, ldc, a, lda, b, ldb, m, n, k)
				for i := 0; i < m; i++ {
					for j := 0; j < n; j++ {
						var want float64
						for l := 0; l < k; l++ {
							want = math.FMA(a[i*lda+l], float64(b[l*ldb+j]), want)
						}
						if g := c[i*ldc+j]; math.Float64bits(g) != math.Float64bits(want) {
							t.Fatalf("%dx%dx%d (%d,%d) = %v, want %v", m, n, k, i, j, g, want)
						}
					}
					if i+1 < m && c[i*ldc+n] != -7 {
						t.Fatalf("%dx%dx%d: wrote past row %d", m, n, k, i)
					}
				}
			}
		}
	}
}

// TestSumSquaresF32 checks sumSquaresF32 (the AVX2 kernel where the CPU
// has one) bit for bit against the portable loop and against a plain sum.
func TestSumSquaresF32(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 9))
	for _, n := range []int{0, 1, 15, 16, 17, 100, 8192} {
		a := make([]float32, n)
		var plain float64
		for i := range a {
			a[i] = float32(rng.NormFloat64())
			plain += float64(a[i]) * float64(a[i])
		}
		got := sumSquaresF32(a)
		n16 := n &^ 15
		want := sumSquaresGo(a[:n16])
		for _, v := range a[n16:] {
			want += float64(v) * float64(v)
		}
		if math.Float64bits(got) != math.Float64bits(want) {
			t.Fatalf("n=%d: %v, portable %v", n, got, want)
		}
		if math.Abs(got-plain) > 1e-13*plain {
			t.Fatalf("n=%d: %v, plain sum %v", n, got, plain)
		}
	}
	if v := sumSquaresF32([]float32{1, float32(math.Inf(1))}); !math.IsInf(v, 1) {
		t.Errorf("sum with +Inf = %v", v)
	}
}
