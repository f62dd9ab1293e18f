package reconstruct

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/blas/blas64"
)

// qrCheck checks that q (k x n) has orthonormal rows and, when m is given,
// that every row of m lies in their span (projecting it changes nothing).
func qrCheck(t *testing.T, q blas64.General, m []float64, tol float64) {
	t.Helper()
	k, n := q.Rows, q.Cols
	row := func(d []float64, i int) []float64 { return d[i*n : (i+1)*n] }
	dot := func(a, b []float64) float64 {
		var s float64
		for i := range a {
			s += a[i] * b[i]
		}
		return s
	}
	for i := 0; i < k; i++ {
		for j := i; j < k; j++ {
			want := 0.0
			if i == j {
				want = 1
			}
			if d := dot(row(q.Data, i), row(q.Data, j)); math.Abs(d-want) > tol {
				t.Fatalf("q%d.q%d = %v, want %v", i, j, d, want)
			}
		}
	}
	for r := 0; m != nil && r < k; r++ {
		x := row(m, r)
		proj := make([]float64, n)
		for i := 0; i < k; i++ {
			c := dot(row(q.Data, i), x)
			for j := range proj {
				proj[j] += c * q.Data[i*n+j]
			}
		}
		for j := range x {
			if math.Abs(proj[j]-x[j]) > 10*tol*(1+math.Abs(x[j])) {
				t.Fatalf("row %d, element %d: projected %v, was %v", r, j, proj[j], x[j])
			}
		}
	}
}

func TestOrthonormalizeRows(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	var w qrWork
	for _, shape := range [][2]int{{8, 50}, {40, 40}, {1, 7}, {40, 300}} {
		k, n := shape[0], shape[1]
		m := make([]float64, k*n)
		for i := range m {
			m[i] = rng.NormFloat64()
		}
		q := blas64.General{Rows: k, Cols: n, Stride: n, Data: append([]float64(nil), m...)}
		w.orthonormalizeRows(q)
		qrCheck(t, q, m, 1e-12)
	}
}

// TestOrthonormalizeRowsDeficient: dependent and zero rows still come out
// orthonormal, and the span of the independent ones is kept.
func TestOrthonormalizeRowsDeficient(t *testing.T) {
	const k, n = 5, 30
	rng := rand.New(rand.NewPCG(4, 4))
	m := make([]float64, k*n)
	for j := 0; j < n; j++ {
		a, b := rng.NormFloat64(), rng.NormFloat64()
		m[0*n+j] = a
		m[1*n+j] = 2 * a // dependent
		m[2*n+j] = 0     // zero
		m[3*n+j] = b
		m[4*n+j] = a - 1e-9*b // nearly dependent
	}
	q := blas64.General{Rows: k, Cols: n, Stride: n, Data: append([]float64(nil), m...)}
	var w qrWork
	w.orthonormalizeRows(q)
	qrCheck(t, q, m, 1e-12)
}

// TestOrthonormalizeRows32 runs the float32 CholeskyQR2 on rows of growing
// condition number (the second pass is refineRows32 on the easy ones, a
// full pass or Householder on the harder ones) and on dependent rows
// (Householder at once): the result is orthonormal to float32 accuracy
// and spans the input, once or twice.
func TestOrthonormalizeRows32(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	for _, tc := range []struct {
		k, n int
		cond float64
	}{{40, 64, 1}, {40, 128, 1e3}, {13, 50, 1e5}, {8, 8, 10}, {1, 9, 1}} {
		t.Run(fmt.Sprintf("%dx%d cond %g", tc.k, tc.n, tc.cond), func(t *testing.T) {
			// m = diag(decay) G for a Gaussian G: condition number about cond.
			m32 := make([]float32, tc.k*tc.n)
			m := make([]float64, tc.k*tc.n)
			for i := 0; i < tc.k; i++ {
				scale := math.Pow(tc.cond, -float64(i)/float64(max(tc.k-1, 1)))
				for j := 0; j < tc.n; j++ {
					m32[i*tc.n+j] = float32(scale * rng.NormFloat64())
					m[i*tc.n+j] = float64(m32[i*tc.n+j])
				}
			}
			for _, once := range []bool{false, true} {
				var w qrWork
				q32 := append([]float32(nil), m32...)
				w.orthonormalizeRows32(q32, tc.k, tc.n, once)
				q := blas64.General{Rows: tc.k, Cols: tc.n, Stride: tc.n, Data: make([]float64, len(q32))}
				for i, v := range q32 {
					q.Data[i] = float64(v)
				}
				tol := 2e-6
				if once {
					tol = 1e-3 // one pass: orthonormal to about 2^-24 kappa
				}
				qrCheck(t, q, m, tol)
			}
		})
	}
	// Dependent rows fall back to Householder.
	const k, n = 4, 20
	m32 := make([]float32, k*n)
	for j := 0; j < n; j++ {
		a := float32(rng.NormFloat64())
		m32[j], m32[n+j], m32[2*n+j], m32[3*n+j] = a, 2*a, float32(rng.NormFloat64()), 0
	}
	var w qrWork
	w.orthonormalizeRows32(m32, k, n, false)
	q := blas64.General{Rows: k, Cols: n, Stride: n, Data: make([]float64, k*n)}
	for i, v := range m32 {
		q.Data[i] = float64(v)
	}
	qrCheck(t, q, nil, 1e-6)
}

// TestRefineRows32Rejects: rows far from orthonormal are left alone.
func TestRefineRows32Rejects(t *testing.T) {
	m := []float32{1, 0, 0, 0.1, 1, 0}
	was := append([]float32(nil), m...)
	var w qrWork
	if w.refineRows32(m, 2, 3) {
		t.Fatal("refined rows 0.1 from orthogonal")
	}
	for i := range m {
		if m[i] != was[i] {
			t.Fatalf("element %d changed to %v", i, m[i])
		}
	}
}

// TestCholUpperSolve checks cholUpper (R^T R = G) and solveRows
// (R^T Q = M) on random positive definite matrices of sizes around the
// four-row blocks, and that cholUpper refuses a singular one.
func TestCholUpperSolve(t *testing.T) {
	rng := rand.New(rand.NewPCG(6, 6))
	for _, k := range []int{1, 2, 3, 4, 5, 8, 17, 40} {
		const n = 23
		b := make([]float32, k*(k+3))
		for i := range b {
			b[i] = float32(rng.NormFloat64())
		}
		g := make([]float64, k*k)
		gramF32(g, b, k, k+3)
		r := append([]float64(nil), g...)
		if !cholUpper(r, k, 0) {
			t.Fatalf("k=%d: positive definite matrix refused", k)
		}
		for i := 0; i < k; i++ {
			for j := i; j < k; j++ {
				var rtr float64
				for p := 0; p <= i; p++ {
					rtr += r[p*k+i] * r[p*k+j]
				}
				if math.Abs(rtr-g[i*k+j]) > 1e-12*g[i*k+i] {
					t.Fatalf("k=%d: (R^T R)[%d][%d] = %v, G %v", k, i, j, rtr, g[i*k+j])
				}
			}
		}
		m := make([]float32, k*n)
		for i := range m {
			m[i] = float32(rng.NormFloat64())
		}
		q := append([]float32(nil), m...)
		var w qrWork
		w.solveRows(q, r, k, n)
		for i := 0; i < k; i++ {
			for l := 0; l < n; l++ {
				var rq, size float64 // (R^T Q)[i][l] and the sum of |terms|
				for p := 0; p <= i; p++ {
					rq += r[p*k+i] * float64(q[p*n+l])
					size += math.Abs(r[p*k+i] * float64(q[p*n+l]))
				}
				if d := math.Abs(rq - float64(m[i*n+l])); d > float64(k)*0x1p-22*size {
					t.Fatalf("k=%d: (R^T Q)[%d][%d] = %v, M %v", k, i, l, rq, m[i*n+l])
				}
			}
		}
	}
	if cholUpper([]float64{1, 1, 1, 1}, 2, 1e-12) {
		t.Error("singular matrix accepted")
	}
}
