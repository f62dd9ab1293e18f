//go:build amd64 && !purego

package reconstruct

import (
	"sync"

	"golang.org/x/sys/cpu"
)

// matmulAVX2 says whether the kernels of matmul_amd64.s can run.
var matmulAVX2 = cpu.X86.HasAVX2

// matmul4x16AVX2 computes C[0:4][0:16] = A[0:4][0:k] B[0:k][0:16]; strides
// in elements, k >= 1.
//
//go:noescape
func matmul4x16AVX2(c, a, b *float32, ldc, lda, ldb, k int)

// matmul1x16AVX2 computes C[0][0:16] = A[0][0:k] B[0:k][0:16], k >= 1.
//
//go:noescape
func matmul1x16AVX2(c, a, b *float32, ldb, k int)

// matmul4x8AVX2 and matmul1x8AVX2 are matmul4x16AVX2 and matmul1x16AVX2
// for a panel of 8 columns.
//
//go:noescape
func matmul4x8AVX2(c, a, b *float32, ldc, lda, ldb, k int)

//go:noescape
func matmul1x8AVX2(c, a, b *float32, ldb, k int)

// matmulFast computes C with the AVX2 kernels (panels of 16 columns, then
// one of 8, then the last few padded to 8) and returns how many columns it
// did: n, or 0 without AVX2. Shapes are checked by matmulF32 and k >= 1. Column panels
// are the outer loop so that a panel of B (k x 16) stays in L1 while every
// row block of A passes over it.
func matmulFast(c []float32, ldc int, a []float32, lda int, b []float32, ldb int, m, n, k int) int {
	n16, n8 := n&^15, n&^7
	if !matmulAVX2 {
		return 0
	}
	for j := 0; j < n16; j += 16 {
		i := 0
		for ; i+4 <= m; i += 4 {
			matmul4x16AVX2(&c[i*ldc+j], &a[i*lda], &b[j], ldc, lda, ldb, k)
		}
		for ; i < m; i++ {
			matmul1x16AVX2(&c[i*ldc+j], &a[i*lda], &b[j], ldb, k)
		}
	}
	if n16 < n8 {
		matmulPanel8(c[n16:], ldc, a, lda, b[n16:], ldb, m, k)
	}
	if n8 < n {
		matmulTail(c[n8:], ldc, a, lda, b[n8:], ldb, m, n-n8, k)
	}
	return n
}

// matmulTail computes the last t < 8 columns of C: B's padded with zeros to
// a panel of 8 in scratch, C's panel made there and its first t columns
// copied out. Each element is the same sequence of operations either way.
func matmulTail(c []float32, ldc int, a []float32, lda int, b []float32, ldb int, m, t, k int) {
	buf := matmulScratch.Get().(*[]float32)
	if cap(*buf) < 8*(k+m) {
		*buf = make([]float32, 8*(k+m))
	}
	pb, pc := (*buf)[:8*k], (*buf)[8*k:8*(k+m)]
	for l := 0; l < k; l++ {
		row := pb[l*8 : l*8+8]
		copy(row, b[l*ldb:l*ldb+t])
		clear(row[t:])
	}
	matmulPanel8(pc, 8, a, lda, pb, 8, m, k)
	for i := 0; i < m; i++ {
		copy(c[i*ldc:i*ldc+t], pc[i*8:i*8+t])
	}
	matmulScratch.Put(buf)
}

// matmulScratch holds the padded panels of matmulFast's last columns.
var matmulScratch = sync.Pool{New: func() any { return new([]float32) }}

// matmulPanel8 computes C[0:m][0:8] = A B[:, 0:8] with the 8-column
// kernels.
func matmulPanel8(c []float32, ldc int, a []float32, lda int, b []float32, ldb int, m, k int) {
	i := 0
	for ; i+4 <= m; i += 4 {
		matmul4x8AVX2(&c[i*ldc], &a[i*lda], &b[0], ldc, lda, ldb, k)
	}
	for ; i < m; i++ {
		matmul1x8AVX2(&c[i*ldc], &a[i*lda], &b[0], ldb, k)
	}
}
