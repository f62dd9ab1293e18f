//go:build amd64 && !purego

#include "textflag.h"

// AVX2 kernels for matmulF32. Each accumulates C tiles of 16 columns over
// l = 0..k-1 in ascending order with one VMULPS (the rounded product) and
// one VADDPS (the rounded sum) per element and step, never an FMA, so the
// bits are those of the portable loop. Accumulators start at +0.
//
// Registers: DI C, SI A row 0, R11-R13 A rows 1-3, DX B row l, R8-R10
// strides in bytes (C, A, B), CX steps left; Y0-Y7 accumulators (row r in
// Y(2r), Y(2r+1)), Y8-Y9 the B row, Y10 a broadcast A element, Y11-Y12
// products.

// STEP(arow, acc0, acc1): acc += broadcast(A[arow]) * (Y8, Y9).
#define STEP(arow, acc0, acc1) \
	VBROADCASTSS (arow), Y10; \
	VMULPS Y8, Y10, Y11; \
	VMULPS Y9, Y10, Y12; \
	VADDPS Y11, acc0, acc0; \
	VADDPS Y12, acc1, acc1

// PROLOGUE4: load the arguments of a four-row kernel, strides in bytes,
// and the pointers to A's rows 1-3.
#define PROLOGUE4 \
	MOVQ c+0(FP), DI; \
	MOVQ a+8(FP), SI; \
	MOVQ b+16(FP), DX; \
	MOVQ ldc+24(FP), R8; \
	MOVQ lda+32(FP), R9; \
	MOVQ ldb+40(FP), R10; \
	MOVQ k+48(FP), CX; \
	SHLQ $2, R8; \
	SHLQ $2, R9; \
	SHLQ $2, R10; \
	LEAQ (SI)(R9*1), R11; \
	LEAQ (R11)(R9*1), R12; \
	LEAQ (R12)(R9*1), R13

// func matmul4x16AVX2(c, a, b *float32, ldc, lda, ldb, k int)
TEXT ·matmul4x16AVX2(SB), NOSPLIT, $0-56
	PROLOGUE4
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7

loop4:
	VMOVUPS (DX), Y8
	VMOVUPS 32(DX), Y9
	STEP(SI, Y0, Y1)
	STEP(R11, Y2, Y3)
	STEP(R12, Y4, Y5)
	STEP(R13, Y6, Y7)
	ADDQ $4, SI
	ADDQ $4, R11
	ADDQ $4, R12
	ADDQ $4, R13
	ADDQ R10, DX
	DECQ CX
	JNZ  loop4

	VMOVUPS Y0, (DI)
	VMOVUPS Y1, 32(DI)
	ADDQ    R8, DI
	VMOVUPS Y2, (DI)
	VMOVUPS Y3, 32(DI)
	ADDQ    R8, DI
	VMOVUPS Y4, (DI)
	VMOVUPS Y5, 32(DI)
	ADDQ    R8, DI
	VMOVUPS Y6, (DI)
	VMOVUPS Y7, 32(DI)
	VZEROUPPER
	RET

// func matmul1x16AVX2(c, a, b *float32, ldb, k int)
TEXT ·matmul1x16AVX2(SB), NOSPLIT, $0-40
	MOVQ c+0(FP), DI
	MOVQ a+8(FP), SI
	MOVQ b+16(FP), DX
	MOVQ ldb+24(FP), R10
	MOVQ k+32(FP), CX
	SHLQ $2, R10
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1

loop1:
	VMOVUPS (DX), Y8
	VMOVUPS 32(DX), Y9
	STEP(SI, Y0, Y1)
	ADDQ $4, SI
	ADDQ R10, DX
	DECQ CX
	JNZ  loop1

	VMOVUPS Y0, (DI)
	VMOVUPS Y1, 32(DI)
	VZEROUPPER
	RET

// STEP8(arow, acc): acc += broadcast(A[arow]) * Y8.
#define STEP8(arow, acc) \
	VBROADCASTSS (arow), Y10; \
	VMULPS Y8, Y10, Y11; \
	VADDPS Y11, acc, acc

// func matmul4x8AVX2(c, a, b *float32, ldc, lda, ldb, k int)
TEXT ·matmul4x8AVX2(SB), NOSPLIT, $0-56
	PROLOGUE4
	VXORPS Y0, Y0, Y0
	VXORPS Y2, Y2, Y2
	VXORPS Y4, Y4, Y4
	VXORPS Y6, Y6, Y6

loop48:
	VMOVUPS (DX), Y8
	STEP8(SI, Y0)
	STEP8(R11, Y2)
	STEP8(R12, Y4)
	STEP8(R13, Y6)
	ADDQ $4, SI
	ADDQ $4, R11
	ADDQ $4, R12
	ADDQ $4, R13
	ADDQ R10, DX
	DECQ CX
	JNZ  loop48

	VMOVUPS Y0, (DI)
	ADDQ    R8, DI
	VMOVUPS Y2, (DI)
	ADDQ    R8, DI
	VMOVUPS Y4, (DI)
	ADDQ    R8, DI
	VMOVUPS Y6, (DI)
	VZEROUPPER
	RET

// func matmul1x8AVX2(c, a, b *float32, ldb, k int)
TEXT ·matmul1x8AVX2(SB), NOSPLIT, $0-40
	MOVQ c+0(FP), DI
	MOVQ a+8(FP), SI
	MOVQ b+16(FP), DX
	MOVQ ldb+24(FP), R10
	MOVQ k+32(FP), CX
	SHLQ $2, R10
	VXORPS Y0, Y0, Y0

loop18:
	VMOVUPS (DX), Y8
	STEP8(SI, Y0)
	ADDQ $4, SI
	ADDQ R10, DX
	DECQ CX
	JNZ  loop18

	VMOVUPS Y0, (DI)
	VZEROUPPER
	RET
