//go:build amd64 && !purego

#include "textflag.h"

// AVX2 and FMA kernels of the row kernels (eigen_kernels.go), bit for bit
// the portable loops: VFNMADD231PD/SD is fma(-x, u, a), the products of
// the rotations are VMULPD each, and the dot products keep four lanes
// (l mod 4) reduced as (s0 + s2) + (s1 + s3), then add the tail one
// element at a time. Rows of any length: four elements at a time, then
// one at a time.

// func eigenGerAVX2(a *float64, lda, m, n int, x, u *float64)
TEXT ·eigenGerAVX2(SB), NOSPLIT, $0-48
	MOVQ a+0(FP), DI
	MOVQ lda+8(FP), R8
	MOVQ m+16(FP), CX
	MOVQ n+24(FP), R9
	MOVQ x+32(FP), SI
	MOVQ u+40(FP), DX
	SHLQ $3, R8
	SHLQ $3, R9
	MOVQ R9, R12
	ANDQ $~31, R12

gerRows:
	VBROADCASTSD (SI), Y0
	XORQ         AX, AX

gerVec:
	CMPQ         AX, R12
	JGE          gerTail
	VMOVUPD      (DI)(AX*1), Y2
	VFNMADD231PD (DX)(AX*1), Y0, Y2
	VMOVUPD      Y2, (DI)(AX*1)
	ADDQ         $32, AX
	JMP          gerVec

gerTail:
	CMPQ         AX, R9
	JGE          gerNext
	VMOVSD       (DI)(AX*1), X2
	VFNMADD231SD (DX)(AX*1), X0, X2
	VMOVSD       X2, (DI)(AX*1)
	ADDQ         $8, AX
	JMP          gerTail

gerNext:
	ADDQ $8, SI
	ADDQ R8, DI
	DECQ CX
	JNZ  gerRows
	VZEROUPPER
	RET

// func eigenGer2AVX2(a *float64, lda, m, n int, x, u, y, v *float64)
TEXT ·eigenGer2AVX2(SB), NOSPLIT, $0-64
	MOVQ a+0(FP), DI
	MOVQ lda+8(FP), R8
	MOVQ m+16(FP), CX
	MOVQ n+24(FP), R9
	MOVQ x+32(FP), SI
	MOVQ u+40(FP), DX
	MOVQ y+48(FP), R10
	MOVQ v+56(FP), R11
	SHLQ $3, R8
	SHLQ $3, R9
	MOVQ R9, R12
	ANDQ $~31, R12

ger2Rows:
	VBROADCASTSD (SI), Y0
	VBROADCASTSD (R10), Y1
	XORQ         AX, AX

ger2Vec:
	CMPQ         AX, R12
	JGE          ger2Tail
	VMOVUPD      (DI)(AX*1), Y2
	VFNMADD231PD (DX)(AX*1), Y0, Y2
	VFNMADD231PD (R11)(AX*1), Y1, Y2
	VMOVUPD      Y2, (DI)(AX*1)
	ADDQ         $32, AX
	JMP          ger2Vec

ger2Tail:
	CMPQ         AX, R9
	JGE          ger2Next
	VMOVSD       (DI)(AX*1), X2
	VFNMADD231SD (DX)(AX*1), X0, X2
	VFNMADD231SD (R11)(AX*1), X1, X2
	VMOVSD       X2, (DI)(AX*1)
	ADDQ         $8, AX
	JMP          ger2Tail

ger2Next:
	ADDQ $8, SI
	ADDQ $8, R10
	ADDQ R8, DI
	DECQ CX
	JNZ  ger2Rows
	VZEROUPPER
	RET

// func eigenGemvAVX2(y, a *float64, lda, m, n int, v *float64)
// Four rows at a time (four independent accumulators, v loaded once for
// them), then one at a time; each row's sums as in gemvGo.
TEXT ·eigenGemvAVX2(SB), NOSPLIT, $0-48
	MOVQ y+0(FP), SI
	MOVQ a+8(FP), DI
	MOVQ lda+16(FP), R8
	MOVQ m+24(FP), CX
	MOVQ n+32(FP), R9
	MOVQ v+40(FP), DX
	SHLQ $3, R8
	SHLQ $3, R9
	MOVQ R9, R12
	ANDQ $~31, R12

gemv4Rows:
	CMPQ   CX, $4
	JLT    gemvRest
	LEAQ   (DI)(R8*1), R10
	LEAQ   (R10)(R8*1), R11
	LEAQ   (R11)(R8*1), R13
	VXORPD Y0, Y0, Y0
	VXORPD Y1, Y1, Y1
	VXORPD Y2, Y2, Y2
	VXORPD Y3, Y3, Y3
	XORQ   AX, AX

gemv4Vec:
	CMPQ        AX, R12
	JGE         gemv4Sum
	VMOVUPD     (DX)(AX*1), Y4
	VFMADD231PD (DI)(AX*1), Y4, Y0
	VFMADD231PD (R10)(AX*1), Y4, Y1
	VFMADD231PD (R11)(AX*1), Y4, Y2
	VFMADD231PD (R13)(AX*1), Y4, Y3
	ADDQ        $32, AX
	JMP         gemv4Vec

gemv4Sum:
	VEXTRACTF128 $1, Y0, X5
	VADDPD       X5, X0, X5
	VPERMILPD    $1, X5, X6
	VADDSD       X6, X5, X0
	VEXTRACTF128 $1, Y1, X5
	VADDPD       X5, X1, X5
	VPERMILPD    $1, X5, X6
	VADDSD       X6, X5, X1
	VEXTRACTF128 $1, Y2, X5
	VADDPD       X5, X2, X5
	VPERMILPD    $1, X5, X6
	VADDSD       X6, X5, X2
	VEXTRACTF128 $1, Y3, X5
	VADDPD       X5, X3, X5
	VPERMILPD    $1, X5, X6
	VADDSD       X6, X5, X3

gemv4Tail:
	CMPQ        AX, R9
	JGE         gemv4Store
	VMOVSD      (DX)(AX*1), X4
	VFMADD231SD (DI)(AX*1), X4, X0
	VFMADD231SD (R10)(AX*1), X4, X1
	VFMADD231SD (R11)(AX*1), X4, X2
	VFMADD231SD (R13)(AX*1), X4, X3
	ADDQ        $8, AX
	JMP         gemv4Tail

gemv4Store:
	VMOVSD X0, (SI)
	VMOVSD X1, 8(SI)
	VMOVSD X2, 16(SI)
	VMOVSD X3, 24(SI)
	ADDQ   $32, SI
	LEAQ   (R13)(R8*1), DI
	SUBQ   $4, CX
	JMP    gemv4Rows

gemvRest:
	TESTQ CX, CX
	JZ    gemvDone

gemvRows:
	VXORPD Y0, Y0, Y0
	XORQ   AX, AX

gemvVec:
	CMPQ        AX, R12
	JGE         gemvSum
	VMOVUPD     (DI)(AX*1), Y1
	VFMADD231PD (DX)(AX*1), Y1, Y0
	ADDQ        $32, AX
	JMP         gemvVec

gemvSum:
	VEXTRACTF128 $1, Y0, X1
	VADDPD       X1, X0, X1
	VPERMILPD    $1, X1, X2
	VADDSD       X2, X1, X1

gemvTail:
	CMPQ        AX, R9
	JGE         gemvNext
	VMOVSD      (DI)(AX*1), X2
	VFMADD231SD (DX)(AX*1), X2, X1
	ADDQ        $8, AX
	JMP         gemvTail

gemvNext:
	VMOVSD X1, (SI)
	ADDQ   $8, SI
	ADDQ   R8, DI
	DECQ   CX
	JNZ    gemvRows
gemvDone:
	VZEROUPPER
	RET

// func eigenRotAVX2(x, y *float64, n int, c, s float64)
TEXT ·eigenRotAVX2(SB), NOSPLIT, $0-40
	MOVQ         x+0(FP), DI
	MOVQ         y+8(FP), SI
	MOVQ         n+16(FP), R9
	VBROADCASTSD c+24(FP), Y0
	VBROADCASTSD s+32(FP), Y1
	SHLQ         $3, R9
	MOVQ         R9, R12
	ANDQ         $~31, R12
	XORQ         AX, AX

rotVec:
	CMPQ    AX, R12
	JGE     rotTail
	VMOVUPD (DI)(AX*1), Y2
	VMOVUPD (SI)(AX*1), Y3
	VMULPD  Y2, Y0, Y4
	VMULPD  Y3, Y1, Y5
	VSUBPD  Y5, Y4, Y4
	VMULPD  Y2, Y1, Y6
	VMULPD  Y3, Y0, Y7
	VADDPD  Y7, Y6, Y6
	VMOVUPD Y4, (DI)(AX*1)
	VMOVUPD Y6, (SI)(AX*1)
	ADDQ    $32, AX
	JMP     rotVec

rotTail:
	CMPQ   AX, R9
	JGE    rotDone
	VMOVSD (DI)(AX*1), X2
	VMOVSD (SI)(AX*1), X3
	VMULSD X2, X0, X4
	VMULSD X3, X1, X5
	VSUBSD X5, X4, X4
	VMULSD X2, X1, X6
	VMULSD X3, X0, X7
	VADDSD X7, X6, X6
	VMOVSD X4, (DI)(AX*1)
	VMOVSD X6, (SI)(AX*1)
	ADDQ   $8, AX
	JMP    rotTail

rotDone:
	VZEROUPPER
	RET

// func eigenSyrAVX2(a *float64, lda, m int, x *float64)
//
// Row i (BX) starts at a[i][i] (DI) and x[i] (R10) and is R9 = m-i long:
// four elements at a time, then one at a time (VFNMADD231SD, the same
// fma).
TEXT ·eigenSyrAVX2(SB), NOSPLIT, $0-32
	MOVQ a+0(FP), DI
	MOVQ lda+8(FP), R8
	MOVQ m+16(FP), CX
	MOVQ x+24(FP), R10
	SHLQ $3, R8
	XORQ BX, BX

syrRows:
	CMPQ         BX, CX
	JGE          syrDone
	MOVQ         CX, R9
	SUBQ         BX, R9
	SHLQ         $3, R9
	MOVQ         R9, R12
	ANDQ         $~31, R12
	VBROADCASTSD (R10), Y0
	XORQ         AX, AX

syrVec:
	CMPQ         AX, R12
	JGE          syrTail
	VMOVUPD      (DI)(AX*1), Y2
	VFNMADD231PD (R10)(AX*1), Y0, Y2
	VMOVUPD      Y2, (DI)(AX*1)
	ADDQ         $32, AX
	JMP          syrVec

syrTail:
	CMPQ         AX, R9
	JGE          syrNext
	VMOVSD       (DI)(AX*1), X2
	VFNMADD231SD (R10)(AX*1), X0, X2
	VMOVSD       X2, (DI)(AX*1)
	ADDQ         $8, AX
	JMP          syrTail

syrNext:
	LEAQ 8(DI)(R8*1), DI
	ADDQ $8, R10
	INCQ BX
	JMP  syrRows

syrDone:
	VZEROUPPER
	RET

// func eigenGemvTAVX2(y, a *float64, lda, m, n int, v *float64)
// y[l] = fma(v[m-1], a[m-1][l], ... fma(v[0], a[0][l], 0)) for l < n,
// n a multiple of 4: sixteen columns at a time down all rows, then four.
TEXT ·eigenGemvTAVX2(SB), NOSPLIT, $0-48
	MOVQ y+0(FP), SI
	MOVQ a+8(FP), DI
	MOVQ lda+16(FP), R8
	MOVQ m+24(FP), CX
	MOVQ n+32(FP), R9
	MOVQ v+40(FP), DX
	SHLQ $3, R8

gemvT16:
	CMPQ   R9, $16
	JLT    gemvT4
	VXORPD Y0, Y0, Y0
	VXORPD Y1, Y1, Y1
	VXORPD Y2, Y2, Y2
	VXORPD Y3, Y3, Y3
	MOVQ   DI, R10
	MOVQ   DX, R11
	MOVQ   CX, R12

gemvT16Rows:
	VBROADCASTSD (R11), Y4
	VFMADD231PD  (R10), Y4, Y0
	VFMADD231PD  32(R10), Y4, Y1
	VFMADD231PD  64(R10), Y4, Y2
	VFMADD231PD  96(R10), Y4, Y3
	ADDQ         R8, R10
	ADDQ         $8, R11
	DECQ         R12
	JNZ          gemvT16Rows
	VMOVUPD      Y0, (SI)
	VMOVUPD      Y1, 32(SI)
	VMOVUPD      Y2, 64(SI)
	VMOVUPD      Y3, 96(SI)
	ADDQ         $128, SI
	ADDQ         $128, DI
	SUBQ         $16, R9
	JMP          gemvT16

gemvT4:
	CMPQ   R9, $4
	JLT    gemvTDone
	VXORPD Y0, Y0, Y0
	MOVQ   DI, R10
	MOVQ   DX, R11
	MOVQ   CX, R12

gemvT4Rows:
	VBROADCASTSD (R11), Y4
	VFMADD231PD  (R10), Y4, Y0
	ADDQ         R8, R10
	ADDQ         $8, R11
	DECQ         R12
	JNZ          gemvT4Rows
	VMOVUPD      Y0, (SI)
	ADDQ         $32, SI
	ADDQ         $32, DI
	SUBQ         $4, R9
	JMP          gemvT4

gemvTDone:
	VZEROUPPER
	RET

// func eigenPivots8AVX2(d, esq, lam *float64, n int, dp, ip, dm, im *float64) float64
// The pivots of eigenWork.pivots for eight shifts (lam[0:8], lanes of two
// registers) and n >= 1 rows: dp[i*8+q] = (d[i] - lam[q]) - esq[i-1] *
// ip[(i-1)*8+q], ip = 1 / dp, and from the bottom dm, im likewise; each
// operation rounded on its own as in the portable loop. It returns the
// smallest |pivot| that is a divisor (all but dp[n-1] and dm[0]).
TEXT ·eigenPivots8AVX2(SB), NOSPLIT, $0-72
	MOVQ d+0(FP), DI
	MOVQ esq+8(FP), SI
	MOVQ lam+16(FP), AX
	MOVQ n+24(FP), CX
	MOVQ dp+32(FP), BX
	MOVQ ip+40(FP), R8
	MOVQ dm+48(FP), R9
	MOVQ im+56(FP), R10
	VMOVUPD (AX), Y8
	VMOVUPD 32(AX), Y9
	MOVQ    $0x3ff0000000000000, AX
	MOVQ    AX, X15
	VBROADCASTSD X15, Y15                // 1.0
	MOVQ    $0x7fffffffffffffff, AX
	MOVQ    AX, X14
	VBROADCASTSD X14, Y14                // |x| mask
	MOVQ    $0x7ff0000000000000, AX
	MOVQ    AX, X7
	VBROADCASTSD X7, Y7                  // running min of |pivot|: +Inf

	// Row 0 from the top, row n-1 from the bottom.
	VBROADCASTSD (DI), Y4
	VSUBPD       Y8, Y4, Y10
	VSUBPD       Y9, Y4, Y11
	VMOVUPD      Y10, (BX)
	VMOVUPD      Y11, 32(BX)
	VDIVPD       Y10, Y15, Y0
	VDIVPD       Y11, Y15, Y1
	VMOVUPD      Y0, (R8)
	VMOVUPD      Y1, 32(R8)
	MOVQ         CX, R13
	DECQ         R13                     // j = n-1
	MOVQ         R13, R14
	SHLQ         $3, R14                 // j*8: d, esq
	SHLQ         $6, R13                 // j*64: pivots
	VBROADCASTSD (DI)(R14*1), Y4
	VSUBPD       Y8, Y4, Y12
	VSUBPD       Y9, Y4, Y13
	VMOVUPD      Y12, (R9)(R13*1)
	VMOVUPD      Y13, 32(R9)(R13*1)
	VDIVPD       Y12, Y15, Y2
	VDIVPD       Y13, Y15, Y3
	VMOVUPD      Y2, (R10)(R13*1)
	VMOVUPD      Y3, 32(R10)(R13*1)
	MOVQ         $8, R12                 // i*8, i = 1
	MOVQ         $64, R11                // i*64
	DECQ         CX                      // rows left: n-1
	JZ           pivDone

pivRows:
	// The pivots of the last step, divisors in this one.
	VANDPD       Y14, Y10, Y6
	VMINPD       Y6, Y7, Y7
	VANDPD       Y14, Y11, Y6
	VMINPD       Y6, Y7, Y7
	VANDPD       Y14, Y12, Y6
	VMINPD       Y6, Y7, Y7
	VANDPD       Y14, Y13, Y6
	VMINPD       Y6, Y7, Y7

	// From the top: row i.
	VBROADCASTSD (DI)(R12*1), Y4
	VBROADCASTSD -8(SI)(R12*1), Y5
	VSUBPD       Y8, Y4, Y10
	VMULPD       Y0, Y5, Y6
	VSUBPD       Y6, Y10, Y10
	VSUBPD       Y9, Y4, Y11
	VMULPD       Y1, Y5, Y6
	VSUBPD       Y6, Y11, Y11
	VMOVUPD      Y10, (BX)(R11*1)
	VMOVUPD      Y11, 32(BX)(R11*1)
	VDIVPD       Y10, Y15, Y0
	VDIVPD       Y11, Y15, Y1
	VMOVUPD      Y0, (R8)(R11*1)
	VMOVUPD      Y1, 32(R8)(R11*1)

	// From the bottom: row j = n-1-i.
	SUBQ         $8, R14
	SUBQ         $64, R13
	VBROADCASTSD (DI)(R14*1), Y4
	VBROADCASTSD (SI)(R14*1), Y5
	VSUBPD       Y8, Y4, Y12
	VMULPD       Y2, Y5, Y6
	VSUBPD       Y6, Y12, Y12
	VSUBPD       Y9, Y4, Y13
	VMULPD       Y3, Y5, Y6
	VSUBPD       Y6, Y13, Y13
	VMOVUPD      Y12, (R9)(R13*1)
	VMOVUPD      Y13, 32(R9)(R13*1)
	VDIVPD       Y12, Y15, Y2
	VDIVPD       Y13, Y15, Y3
	VMOVUPD      Y2, (R10)(R13*1)
	VMOVUPD      Y3, 32(R10)(R13*1)
	ADDQ         $8, R12
	ADDQ         $64, R11
	DECQ         CX
	JNZ          pivRows

pivDone:
	VEXTRACTF128 $1, Y7, X6
	VMINPD       X6, X7, X7
	VPERMILPD    $1, X7, X6
	VMINSD       X6, X7, X7
	VMOVSD       X7, ret+64(FP)
	VZEROUPPER
	RET
