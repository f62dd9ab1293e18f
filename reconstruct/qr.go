package reconstruct

import (
	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/lapack/lapack64"
)

// qrWork holds the scratch of orthonormalizeRows so that a randomized SVD,
// which orthonormalizes several times, allocates it once.
type qrWork struct {
	tau, work []float64
	f64       []float64 // float64 copy for orthonormalizeRows32
}

// orthonormalizeRows replaces the rows of m (Rows <= Cols) by an
// orthonormal basis of their span: the Q of a Householder LQ factorisation
// m = L Q (LAPACK dgelqf then dorglq, gonum's blocked Go port), in float64.
// It is the QR of m^T, done on rows because rows are contiguous here.
// Householder factorisations are backward stable: Q is orthonormal to
// machine precision however ill-conditioned or rank-deficient m is (a row
// that depends on the earlier ones gets a new orthonormal direction), which
// Gram-Schmidt does not guarantee.
func (w *qrWork) orthonormalizeRows(m blas64.General) {
	k := m.Rows
	if cap(w.tau) < k {
		w.tau = make([]float64, k)
	}
	tau := w.tau[:k]
	var q [1]float64
	lapack64.Gelqf(m, tau, q[:], -1)
	need := int(q[0])
	lapack64.Orglq(m, tau, q[:], -1)
	need = max(need, int(q[0]), 1)
	if cap(w.work) < need {
		w.work = make([]float64, need)
	}
	work := w.work[:need]
	lapack64.Gelqf(m, tau, work, need)
	lapack64.Orglq(m, tau, work, need)
}

// orthonormalizeRows32 is orthonormalizeRows of the k x n float32 matrix m,
// done in float64 and rounded back.
func (w *qrWork) orthonormalizeRows32(m []float32, k, n int) {
	if cap(w.f64) < k*n {
		w.f64 = make([]float64, k*n)
	}
	d := w.f64[:k*n]
	for i, v := range m[:k*n] {
		d[i] = float64(v)
	}
	w.orthonormalizeRows(blas64.General{Rows: k, Cols: n, Stride: n, Data: d})
	for i, v := range d {
		m[i] = float32(v)
	}
}
