package reconstruct

import (
	"fmt"
	"math"
)

// dotF32 sets C = A B^T for row-major float32 A and B, C float64: C is
// m x n (row stride ldc), A is m x k (stride lda) and B is n x k (stride
// ldb), so that C[i][j] is the dot product of row i of A and row j of B.
// Every element is computed exactly as
//
//	s[p] = +0 for p = 0..3
//	for l = 0 .. k4-1 (k4 = k &^ 3): s[l%4] += float64(A[i][l]) * float64(B[j][l])
//	acc = (s[0] + s[2]) + (s[1] + s[3])
//	for l = k4 .. k-1: acc += float64(A[i][l]) * float64(B[j][l])
//
// so that the AVX2 kernel and the portable loop give the same bits. The
// products of two float32 values are exact in float64 (so a fused
// multiply-add rounds the same), the sums are the only rounding, at float64
// precision: C is the Gram or cross product of float32 data to about
// 2^-53 k of its magnitude. It panics when a slice is too short for its
// shape: an internal invariant, checked because the SIMD kernel reads
// through pointers.
func dotF32(c []float64, ldc int, a []float32, lda int, b []float32, ldb int, m, n, k int) {
	dotCheck(len(c), ldc, len(a), lda, len(b), ldb, m, n, k)
	k4 := k &^ 3
	mt, nt := 0, 0
	if k4 > 0 && dotF32Fast(c, ldc, a, lda, b, ldb, m, n, k4) {
		mt, nt = m&^3, n&^1
	}
	for i := 0; i < m; i++ {
		ai := a[i*lda : i*lda+k]
		j := 0
		if i < mt && k4 == k {
			j = nt // the kernel did these in full
		}
		for ; j < n; j++ {
			bj := b[j*ldb : j*ldb+k]
			acc := c[i*ldc+j]
			if i >= mt || j >= nt {
				acc = dotLanes32(ai, bj, k4)
			}
			c[i*ldc+j] = dotTail32(acc, ai, bj, k4)
		}
	}
}

func dotCheck(lc, ldc, la, lda, lb, ldb, m, n, k int) {
	if m < 0 || n < 0 || k < 0 || ldc < n || lda < k || ldb < k ||
		(m > 0 && n > 0 && lc < (m-1)*ldc+n) ||
		(m > 0 && la < (m-1)*lda+k) || (n > 0 && lb < (n-1)*ldb+k) {
		panic(fmt.Sprintf("reconstruct: dot %dx%dx%d with |c|=%d/%d |a|=%d/%d |b|=%d/%d",
			m, n, k, lc, ldc, la, lda, lb, ldb))
	}
}

// dotLanes64 is dotLanes32 for float64 rows, each product and sum rounded
// once by math.FMA (the row kernels' dot products, see gemv).
func dotLanes64(a, b []float64, k4 int) float64 {
	var s0, s1, s2, s3 float64
	a, b = a[:k4], b[:k4]
	for l := 0; l+3 < len(a) && l+3 < len(b); l += 4 {
		s0 = math.FMA(a[l], b[l], s0)
		s1 = math.FMA(a[l+1], b[l+1], s1)
		s2 = math.FMA(a[l+2], b[l+2], s2)
		s3 = math.FMA(a[l+3], b[l+3], s3)
	}
	return (s0 + s2) + (s1 + s3)
}

// dotTail64 adds the products a[l] b[l] for l >= k4 to acc in order.
func dotTail64(acc float64, a, b []float64, k4 int) float64 {
	for l := k4; l < len(a); l++ {
		acc = math.FMA(a[l], b[l], acc)
	}
	return acc
}

// dotLanes32 is the four-lane part of a dotF32 element over a[:k4], b[:k4].
func dotLanes32(a, b []float32, k4 int) float64 {
	var s0, s1, s2, s3 float64
	a, b = a[:k4], b[:k4]
	for l := 0; l+3 < len(a) && l+3 < len(b); l += 4 {
		s0 += float64(a[l]) * float64(b[l])
		s1 += float64(a[l+1]) * float64(b[l+1])
		s2 += float64(a[l+2]) * float64(b[l+2])
		s3 += float64(a[l+3]) * float64(b[l+3])
	}
	return (s0 + s2) + (s1 + s3)
}

// dotTail32 adds the products a[l] b[l] for l >= k4 to acc in order.
func dotTail32(acc float64, a, b []float32, k4 int) float64 {
	for l := k4; l < len(a); l++ {
		acc += float64(a[l]) * float64(b[l])
	}
	return acc
}

// gramF32 sets g (k x k, stride k) to the Gram matrix m m^T of the rows
// of the float32 matrix m (k x n, stride n), both triangles.
func gramF32(g []float64, m []float32, k, n int) {
	gramUpperF32(g, m, k, n)
	for i := 1; i < k; i++ {
		for j := 0; j < i; j++ {
			g[i*k+j] = g[j*k+i]
		}
	}
}

// gramUpperF32 is gramF32 on the upper triangle only (and a few elements
// below it): dotF32 in blocks of four rows from the diagonal on.
func gramUpperF32(g []float64, m []float32, k, n int) {
	for i := 0; i < k; i += 4 {
		rb := min(4, k-i)
		dotF32(g[i*k+i:], k, m[i*n:], n, m[i*n:], n, rb, k-i, n)
	}
}

// mulF64F32 sets C = A B with A float64 (m x k, stride lda), B float32
// (k x n, stride ldb) widened to float64, and C float64 (m x n, stride
// ldc), every element computed exactly as
//
//	acc = +0; for l = 0 .. k-1: acc = fma(A[i][l], B[l][j], acc)
//
// so that the AVX2 kernel and the portable loop give the same bits. It
// panics when a slice is too short for its shape.
func mulF64F32(c []float64, ldc int, a []float64, lda int, b []float32, ldb int, m, n, k int) {
	if m < 0 || n < 0 || k < 0 || ldc < n || lda < k || ldb < n ||
		(m > 0 && n > 0 && len(c) < (m-1)*ldc+n) ||
		(m > 0 && len(a) < (m-1)*lda+k) || (k > 0 && n > 0 && len(b) < (k-1)*ldb+n) {
		panic(fmt.Sprintf("reconstruct: mul %dx%dx%d with |c|=%d/%d |a|=%d/%d |b|=%d/%d",
			m, n, k, len(c), ldc, len(a), lda, len(b), ldb))
	}
	mt, nt := 0, 0
	if k > 0 && mulF64F32Fast(c, ldc, a, lda, b, ldb, m, n, k) {
		mt, nt = m&^3, n&^7
	}
	for i := 0; i < m; i++ {
		j := 0
		if i < mt {
			j = nt
		}
		row, ai := c[i*ldc:i*ldc+n], a[i*lda:i*lda+k]
		for ; j < n; j++ {
			var acc float64
			for l, al := range ai {
				acc = math.FMA(al, float64(b[l*ldb+j]), acc)
			}
			row[j] = acc
		}
	}
}

// sumSquaresF32 is the sum of the squares of a in float64: sixteen
// partial sums s[j] over the elements i = j mod 16 of a[:n16] (n16 =
// len(a) &^ 15), combined as t[p] = (s[p] + s[p+4]) + (s[p+8] + s[p+12])
// and (t[0] + t[2]) + (t[1] + t[3]), then the rest added in order. The
// squares of float32 values are exact in float64 and cannot overflow it,
// so the sum is finite exactly when every element is.
func sumSquaresF32(a []float32) float64 {
	n16 := len(a) &^ 15
	acc, ok := sumSquaresFast(a[:n16])
	if !ok {
		acc = sumSquaresGo(a[:n16])
	}
	for _, v := range a[n16:] {
		acc += float64(v) * float64(v)
	}
	return acc
}

// sumSquaresGo is the portable sixteen-lane part of sumSquaresF32.
func sumSquaresGo(a []float32) float64 {
	var s [16]float64
	for i := 0; i+15 < len(a); i += 16 {
		b := a[i : i+16]
		for j, v := range b {
			s[j] += float64(v) * float64(v)
		}
	}
	var t [4]float64
	for p := range t {
		t[p] = (s[p] + s[p+4]) + (s[p+8] + s[p+12])
	}
	return (t[0] + t[2]) + (t[1] + t[3])
}
