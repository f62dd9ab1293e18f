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
