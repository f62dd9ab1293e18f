package reconstruct

import "fmt"

// matmulF32 sets C = A B for row-major float32 matrices: C is m x n with
// row stride ldc, A is m x k (stride lda), B is k x n (stride ldb). Every
// element is computed exactly as
//
//	acc = +0; for l = 0, 1, ..., k-1: acc = acc + float32(A[i][l] * B[l][j])
//
// each product and each sum rounded to float32 on its own (no fused
// multiply-add), so the SIMD kernels and the portable loop give the same
// bits, and so does a GPU kernel written with __fmul_rn and __fadd_rn. It
// panics when a slice is too short for its shape: an internal invariant,
// checked because the SIMD kernels read through pointers.
func matmulF32(c []float32, ldc int, a []float32, lda int, b []float32, ldb int, m, n, k int) {
	if m <= 0 || n <= 0 {
		return
	}
	if ldc < n || lda < k || ldb < n || len(c) < (m-1)*ldc+n ||
		(k > 0 && (len(a) < (m-1)*lda+k || len(b) < (k-1)*ldb+n)) {
		panic(fmt.Sprintf("reconstruct: matmul %dx%dx%d with |c|=%d/%d |a|=%d/%d |b|=%d/%d",
			m, n, k, len(c), ldc, len(a), lda, len(b), ldb))
	}
	if k == 0 {
		for i := 0; i < m; i++ {
			clear(c[i*ldc : i*ldc+n])
		}
		return
	}
	done := matmulFast(c, ldc, a, lda, b, ldb, m, n, k)
	if done < n {
		matmulF32Generic(c[done:], ldc, a, lda, b[done:], ldb, m, n-done, k)
	}
}

// matmulF32Generic is the portable matmulF32 (shapes already checked).
// Summing row by row over l gives each element the same sequence of
// operations as the per-element loop; float32() around each product stops
// the compiler from fusing it into the sum.
func matmulF32Generic(c []float32, ldc int, a []float32, lda int, b []float32, ldb int, m, n, k int) {
	for i := 0; i < m; i++ {
		row := c[i*ldc : i*ldc+n]
		clear(row)
		for l, al := range a[i*lda : i*lda+k] {
			bl := b[l*ldb : l*ldb+n]
			bl = bl[:len(row)]
			for j := range row {
				row[j] += float32(al * bl[j])
			}
		}
	}
}
