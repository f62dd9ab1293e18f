package reconstruct

import (
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
