//go:build amd64 && !purego

package reconstruct

import "golang.org/x/sys/cpu"

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

// matmulFast computes the first n &^ 15 columns of C with the AVX2 kernels
// and returns how many it did (0 without AVX2). Shapes are checked by
// matmulF32 and k >= 1. Column panels are the outer loop so that a panel
// of B (k x 16) stays in L1 while every row block of A passes over it.
func matmulFast(c []float32, ldc int, a []float32, lda int, b []float32, ldb int, m, n, k int) int {
	n16 := n &^ 15
	if !matmulAVX2 || n16 == 0 {
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
	return n16
}
