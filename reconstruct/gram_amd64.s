//go:build amd64 && !purego

#include "textflag.h"

// AVX2 and FMA kernels of gram.go. dot4x2F32 computes a 4x2 tile of
// C = A B^T over l < k4: lane p of each accumulator sums the products with
// l = p mod 4 in ascending l by VFMADD231PD (exact products, so the fma
// rounds as the portable multiply-add), then the lanes are reduced as
// (s0 + s2) + (s1 + s3), the order the portable loop uses.
//
// Registers: DI C, R8 C stride in bytes, SI and R11-R13 A rows 0-3, DX and
// BX B rows 0-1, AX the byte offset into the rows, CX its end; Y0-Y7 the
// accumulators (C[i][j] in Y(2i+j)), Y8-Y11 the A elements, Y12-Y13 the B
// elements.

// PROLOGUE(shift): load the arguments, A and B strides and k4 scaled by
// 1<<shift bytes.
#define PROLOGUE(shift) \
	MOVQ c+0(FP), DI; \
	MOVQ a+8(FP), SI; \
	MOVQ b+16(FP), DX; \
	MOVQ ldc+24(FP), R8; \
	MOVQ lda+32(FP), R9; \
	MOVQ ldb+40(FP), R10; \
	MOVQ k4+48(FP), CX; \
	SHLQ $3, R8; \
	SHLQ $shift, R9; \
	SHLQ $shift, R10; \
	SHLQ $shift, CX; \
	LEAQ (SI)(R9*1), R11; \
	LEAQ (R11)(R9*1), R12; \
	LEAQ (R12)(R9*1), R13; \
	LEAQ (DX)(R10*1), BX; \
	XORQ AX, AX; \
	VXORPD Y0, Y0, Y0; \
	VXORPD Y1, Y1, Y1; \
	VXORPD Y2, Y2, Y2; \
	VXORPD Y3, Y3, Y3; \
	VXORPD Y4, Y4, Y4; \
	VXORPD Y5, Y5, Y5; \
	VXORPD Y6, Y6, Y6; \
	VXORPD Y7, Y7, Y7

// FMAS: the eight accumulators += A elements (Y8-Y11) times B (Y12-Y13).
#define FMAS \
	VFMADD231PD Y12, Y8, Y0; \
	VFMADD231PD Y13, Y8, Y1; \
	VFMADD231PD Y12, Y9, Y2; \
	VFMADD231PD Y13, Y9, Y3; \
	VFMADD231PD Y12, Y10, Y4; \
	VFMADD231PD Y13, Y10, Y5; \
	VFMADD231PD Y12, Y11, Y6; \
	VFMADD231PD Y13, Y11, Y7

// HSUM(acc, xacc, off): store (s0 + s2) + (s1 + s3) of acc at off(DI).
#define HSUM(acc, xacc, off) \
	VEXTRACTF128 $1, acc, X14; \
	VADDPD       X14, xacc, X14; \
	VPERMILPD    $1, X14, X13; \
	VADDSD       X13, X14, X14; \
	VMOVSD       X14, off(DI)

// EPILOGUE: store the tile, row by row.
#define EPILOGUE \
	HSUM(Y0, X0, 0); \
	HSUM(Y1, X1, 8); \
	ADDQ R8, DI; \
	HSUM(Y2, X2, 0); \
	HSUM(Y3, X3, 8); \
	ADDQ R8, DI; \
	HSUM(Y4, X4, 0); \
	HSUM(Y5, X5, 8); \
	ADDQ R8, DI; \
	HSUM(Y6, X6, 0); \
	HSUM(Y7, X7, 8); \
	VZEROUPPER

// func dot4x2F32(c *float64, a, b *float32, ldc, lda, ldb, k4 int)
TEXT ·dot4x2F32(SB), NOSPLIT, $0-56
	PROLOGUE(2)

loop32:
	VCVTPS2PD (DX)(AX*1), Y12
	VCVTPS2PD (BX)(AX*1), Y13
	VCVTPS2PD (SI)(AX*1), Y8
	VCVTPS2PD (R11)(AX*1), Y9
	VCVTPS2PD (R12)(AX*1), Y10
	VCVTPS2PD (R13)(AX*1), Y11
	FMAS
	ADDQ $16, AX
	CMPQ AX, CX
	JLT  loop32

	EPILOGUE
	RET

// func mul4x8F64F32(c, a *float64, b *float32, ldc, lda, ldb, k int)
//
// C[i][j] += A[i][l] * B[l][j] by VFMADD231PD in ascending l, from +0.
// Registers: DI C, SI and R11-R13 A rows 0-3 (advancing by one element),
// DX B row l, R8-R10 strides in bytes (C, A, B), CX steps left; Y0-Y7 the
// accumulators (row i in Y(2i), Y(2i+1)), Y8-Y9 the B row widened, Y10 a
// broadcast A element.
TEXT ·mul4x8F64F32(SB), NOSPLIT, $0-56
	MOVQ   c+0(FP), DI
	MOVQ   a+8(FP), SI
	MOVQ   b+16(FP), DX
	MOVQ   ldc+24(FP), R8
	MOVQ   lda+32(FP), R9
	MOVQ   ldb+40(FP), R10
	MOVQ   k+48(FP), CX
	SHLQ   $3, R8
	SHLQ   $3, R9
	SHLQ   $2, R10
	LEAQ   (SI)(R9*1), R11
	LEAQ   (R11)(R9*1), R12
	LEAQ   (R12)(R9*1), R13
	VXORPD Y0, Y0, Y0
	VXORPD Y1, Y1, Y1
	VXORPD Y2, Y2, Y2
	VXORPD Y3, Y3, Y3
	VXORPD Y4, Y4, Y4
	VXORPD Y5, Y5, Y5
	VXORPD Y6, Y6, Y6
	VXORPD Y7, Y7, Y7

mulLoop:
	VCVTPS2PD    (DX), Y8
	VCVTPS2PD    16(DX), Y9
	VBROADCASTSD (SI), Y10
	VFMADD231PD  Y8, Y10, Y0
	VFMADD231PD  Y9, Y10, Y1
	VBROADCASTSD (R11), Y10
	VFMADD231PD  Y8, Y10, Y2
	VFMADD231PD  Y9, Y10, Y3
	VBROADCASTSD (R12), Y10
	VFMADD231PD  Y8, Y10, Y4
	VFMADD231PD  Y9, Y10, Y5
	VBROADCASTSD (R13), Y10
	VFMADD231PD  Y8, Y10, Y6
	VFMADD231PD  Y9, Y10, Y7
	ADDQ         $8, SI
	ADDQ         $8, R11
	ADDQ         $8, R12
	ADDQ         $8, R13
	ADDQ         R10, DX
	DECQ         CX
	JNZ          mulLoop

	VMOVUPD Y0, (DI)
	VMOVUPD Y1, 32(DI)
	ADDQ    R8, DI
	VMOVUPD Y2, (DI)
	VMOVUPD Y3, 32(DI)
	ADDQ    R8, DI
	VMOVUPD Y4, (DI)
	VMOVUPD Y5, 32(DI)
	ADDQ    R8, DI
	VMOVUPD Y6, (DI)
	VMOVUPD Y7, 32(DI)
	VZEROUPPER
	RET

// func sumSquares16F32(a *float32, n16 int) float64
//
// Y0-Y3 hold s[0:4], s[4:8], s[8:12], s[12:16] of sumSquaresF32.
TEXT ·sumSquares16F32(SB), NOSPLIT, $0-24
	MOVQ   a+0(FP), SI
	MOVQ   n16+8(FP), CX
	SHLQ   $2, CX
	XORQ   AX, AX
	VXORPD Y0, Y0, Y0
	VXORPD Y1, Y1, Y1
	VXORPD Y2, Y2, Y2
	VXORPD Y3, Y3, Y3

sqLoop:
	VCVTPS2PD   (SI)(AX*1), Y4
	VCVTPS2PD   16(SI)(AX*1), Y5
	VCVTPS2PD   32(SI)(AX*1), Y6
	VCVTPS2PD   48(SI)(AX*1), Y7
	VFMADD231PD Y4, Y4, Y0
	VFMADD231PD Y5, Y5, Y1
	VFMADD231PD Y6, Y6, Y2
	VFMADD231PD Y7, Y7, Y3
	ADDQ        $64, AX
	CMPQ        AX, CX
	JLT         sqLoop

	VADDPD       Y1, Y0, Y0
	VADDPD       Y3, Y2, Y2
	VADDPD       Y2, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPD       X1, X0, X1
	VPERMILPD    $1, X1, X2
	VADDSD       X2, X1, X1
	VMOVSD       X1, ret+16(FP)
	VZEROUPPER
	RET
