//go:build amd64 && !purego

#include "textflag.h"

// AVX2 kernels of the int8/int4 decoder. Each element is decoded with
// exactly the operations of the Go dequant: the code widened to float32,
// one rounded product with the scale, one rounded add of the offset (no
// FMA), then rounded to the output dtype to nearest even (bf16 with the
// integer trick of toBF16, f16 with VCVTPS2PH in round-to-nearest-even
// mode, which handles subnormals as format.F32ToF16 does), so the output
// is bit-identical to the portable code. 16 elements a step, then 8 where
// a row or group is an odd multiple of 8; no load or store past the
// elements given.
//
// Rows kernels take
//
//	func(dst, codes unsafe.Pointer, sc, of *float32, n, m int)
//
// and decode n rows of m contiguous elements, n >= 1, m a positive
// multiple of 8, element c of every row with sc[c] and of[c] (the rows of
// a key group). Groups kernels take the same arguments and decode n groups
// of m contiguous elements, group g with sc[g] and of[g] (value groups).
// int4 codes are two a byte, low nibble first, and start at a byte
// boundary (an even element).
//
// Registers: R11 dst, R10 codes, R8 sc, R9 of, CX rows or groups left, BX
// m, DX m rounded down to a multiple of 16, AX element index in the row or
// group; Y0-Y3 math, Y6/Y7 a group's broadcast scale and offset, Y13 0x7fff
// and Y14 1 (bf16 rounding), Y15 0x0f bytes (int4 nibble mask).

#define ARGS \
	MOVQ dst+0(FP), R11; \
	MOVQ codes+8(FP), R10; \
	MOVQ sc+16(FP), R8; \
	MOVQ of+24(FP), R9; \
	MOVQ n+32(FP), CX; \
	MOVQ m+40(FP), BX; \
	MOVL $0x7fff, DX; \
	VMOVD DX, X13; \
	VPBROADCASTD X13, Y13; \
	MOVL $1, DX; \
	VMOVD DX, X14; \
	VPBROADCASTD X14, Y14; \
	MOVL $0x0f0f0f0f, DX; \
	VMOVD DX, X15; \
	VPBROADCASTD X15, Y15

// Loads of 8 codes as int32 into Y0.
#define LOAD8 \
	VPMOVZXBD (R10), Y0; \
	ADDQ $8, R10

// int4: 4 bytes b0..b3 -> bytes b0&15, b0>>4, b1&15, ... -> int32.
#define LOAD4 \
	VMOVD (R10), X0; \
	VPSRLW $4, X0, X1; \
	VPUNPCKLBW X1, X0, X0; \
	VPAND X15, X0, X0; \
	VPMOVZXBD X0, Y0; \
	ADDQ $4, R10

// Stores of the 8 float32 of Y0, rounded to the dtype.
#define STOREF32 \
	VMOVUPS Y0, (R11); \
	ADDQ $32, R11

#define STOREF16 \
	VCVTPS2PH $0, Y0, (R11); \
	ADDQ $16, R11

// bits += 0x7fff + (bits>>16)&1, then the high halves packed in order.
#define STOREBF16 \
	VPSRLD $16, Y0, Y1; \
	VPAND Y14, Y1, Y1; \
	VPADDD Y13, Y0, Y0; \
	VPADDD Y1, Y0, Y0; \
	VPSRLD $16, Y0, Y0; \
	VEXTRACTI128 $1, Y0, X1; \
	VPACKUSDW X1, X0, X0; \
	VMOVDQU X0, (R11); \
	ADDQ $16, R11

// Loads of 16 codes as int32 into Y0 (first 8) and Y2 (next 8).
#define LOAD16x8 \
	VPMOVZXBD (R10), Y0; \
	VPMOVZXBD 8(R10), Y2; \
	ADDQ $16, R10

#define LOAD16x4 \
	VMOVQ (R10), X0; \
	VPSRLW $4, X0, X1; \
	VPUNPCKLBW X1, X0, X0; \
	VPAND X15, X0, X0; \
	VPSRLDQ $8, X0, X2; \
	VPMOVZXBD X0, Y0; \
	VPMOVZXBD X2, Y2; \
	ADDQ $8, R10

// Stores of the 16 float32 of Y0 and Y2, rounded to the dtype.
#define STORE16F32 \
	VMOVUPS Y0, (R11); \
	VMOVUPS Y2, 32(R11); \
	ADDQ $64, R11

#define STORE16F16 \
	VCVTPS2PH $0, Y0, (R11); \
	VCVTPS2PH $0, Y2, 16(R11); \
	ADDQ $32, R11

// The packed words come out lane-interleaved (Y0 0-3, Y2 0-3, Y0 4-7,
// Y2 4-7); VPERMQ puts them in order.
#define STORE16BF16 \
	VPSRLD $16, Y0, Y1; \
	VPSRLD $16, Y2, Y3; \
	VPAND Y14, Y1, Y1; \
	VPAND Y14, Y3, Y3; \
	VPADDD Y13, Y0, Y0; \
	VPADDD Y13, Y2, Y2; \
	VPADDD Y1, Y0, Y0; \
	VPADDD Y3, Y2, Y2; \
	VPSRLD $16, Y0, Y0; \
	VPSRLD $16, Y2, Y2; \
	VPACKUSDW Y2, Y0, Y0; \
	VPERMQ $0xd8, Y0, Y0; \
	VMOVDQU Y0, (R11); \
	ADDQ $32, R11

// ROWS and GROUPS run 16 elements a step, then 8 where m is an odd
// multiple of 8. DX = m rounded down to a multiple of 16.
#define ROWS(LOAD, LOAD16, STORE, STORE16) \
	ARGS; \
	MOVQ BX, DX; \
	ANDQ $-16, DX; \
row: \
	XORQ AX, AX; \
	CMPQ AX, DX; \
	JGE tail; \
loop: \
	LOAD16; \
	VCVTDQ2PS Y0, Y0; \
	VCVTDQ2PS Y2, Y2; \
	VMULPS (R8)(AX*4), Y0, Y0; \
	VMULPS 32(R8)(AX*4), Y2, Y2; \
	VADDPS (R9)(AX*4), Y0, Y0; \
	VADDPS 32(R9)(AX*4), Y2, Y2; \
	STORE16; \
	ADDQ $16, AX; \
	CMPQ AX, DX; \
	JLT loop; \
tail: \
	CMPQ AX, BX; \
	JGE next; \
	LOAD; \
	VCVTDQ2PS Y0, Y0; \
	VMULPS (R8)(AX*4), Y0, Y0; \
	VADDPS (R9)(AX*4), Y0, Y0; \
	STORE; \
next: \
	DECQ CX; \
	JNZ row; \
	VZEROUPPER; \
	RET

#define GROUPS(LOAD, LOAD16, STORE, STORE16) \
	ARGS; \
	MOVQ BX, DX; \
	ANDQ $-16, DX; \
group: \
	VBROADCASTSS (R8), Y6; \
	VBROADCASTSS (R9), Y7; \
	ADDQ $4, R8; \
	ADDQ $4, R9; \
	XORQ AX, AX; \
	CMPQ AX, DX; \
	JGE tail; \
loop: \
	LOAD16; \
	VCVTDQ2PS Y0, Y0; \
	VCVTDQ2PS Y2, Y2; \
	VMULPS Y6, Y0, Y0; \
	VMULPS Y6, Y2, Y2; \
	VADDPS Y7, Y0, Y0; \
	VADDPS Y7, Y2, Y2; \
	STORE16; \
	ADDQ $16, AX; \
	CMPQ AX, DX; \
	JLT loop; \
tail: \
	CMPQ AX, BX; \
	JGE next; \
	LOAD; \
	VCVTDQ2PS Y0, Y0; \
	VMULPS Y6, Y0, Y0; \
	VADDPS Y7, Y0, Y0; \
	STORE; \
next: \
	DECQ CX; \
	JNZ group; \
	VZEROUPPER; \
	RET

// Parameter kernels: widen n scales and offsets (n a positive multiple of
// 8) from s and o into sc and of, and report whether every pair passes
// validParams: s >= 0, s <= MaxFloat32, |o| < lim, |float32(qmax*s)+o| <
// lim, each an ordered compare (false for NaN), as in Go.
//
//	func(sc, of *float32, s, o unsafe.Pointer, n int, qmax, lim float32) bool
//
// Registers: DI sc, R8 of, SI s, DX o, CX n, AX index; Y8 0, Y9 abs mask,
// Y10 qmax, Y11 lim, Y12 MaxFloat32.
#define PARAMS(LOADS, LOADO) \
	MOVQ sc+0(FP), DI; \
	MOVQ of+8(FP), R8; \
	MOVQ s+16(FP), SI; \
	MOVQ o+24(FP), DX; \
	MOVQ n+32(FP), CX; \
	VBROADCASTSS qmax+40(FP), Y10; \
	VBROADCASTSS lim+44(FP), Y11; \
	MOVL $0x7f7fffff, BX; \
	VMOVD BX, X12; \
	VPBROADCASTD X12, Y12; \
	MOVL $0x7fffffff, BX; \
	VMOVD BX, X9; \
	VPBROADCASTD X9, Y9; \
	VXORPS Y8, Y8, Y8; \
	XORQ AX, AX; \
loop: \
	LOADS; \
	LOADO; \
	VMOVUPS Y0, (DI)(AX*4); \
	VMOVUPS Y1, (R8)(AX*4); \
	VCMPPS $0x1d, Y8, Y0, Y2; \
	VCMPPS $0x12, Y12, Y0, Y3; \
	VANDPS Y3, Y2, Y2; \
	VANDPS Y9, Y1, Y4; \
	VCMPPS $0x11, Y11, Y4, Y4; \
	VANDPS Y4, Y2, Y2; \
	VMULPS Y10, Y0, Y5; \
	VADDPS Y1, Y5, Y5; \
	VANDPS Y9, Y5, Y5; \
	VCMPPS $0x11, Y11, Y5, Y5; \
	VANDPS Y5, Y2, Y2; \
	VMOVMSKPS Y2, BX; \
	CMPL BX, $0xff; \
	JNE bad; \
	ADDQ $8, AX; \
	CMPQ AX, CX; \
	JLT loop; \
	MOVB $1, ret+48(FP); \
	VZEROUPPER; \
	RET; \
bad: \
	MOVB $0, ret+48(FP); \
	VZEROUPPER; \
	RET

#define LOADSF16 VCVTPH2PS (SI)(AX*2), Y0
#define LOADOF16 VCVTPH2PS (DX)(AX*2), Y1
#define LOADSF32 VMOVUPS (SI)(AX*4), Y0
#define LOADOF32 VMOVUPS (DX)(AX*4), Y1

// func dqRowsInt8BF16(dst, codes unsafe.Pointer, sc, of *float32, n, m int)
TEXT ·dqRowsInt8BF16(SB), NOSPLIT, $0-48
	ROWS(LOAD8, LOAD16x8, STOREBF16, STORE16BF16)

// func dqRowsInt8F16(dst, codes unsafe.Pointer, sc, of *float32, n, m int)
TEXT ·dqRowsInt8F16(SB), NOSPLIT, $0-48
	ROWS(LOAD8, LOAD16x8, STOREF16, STORE16F16)

// func dqRowsInt8F32(dst, codes unsafe.Pointer, sc, of *float32, n, m int)
TEXT ·dqRowsInt8F32(SB), NOSPLIT, $0-48
	ROWS(LOAD8, LOAD16x8, STOREF32, STORE16F32)

// func dqRowsInt4BF16(dst, codes unsafe.Pointer, sc, of *float32, n, m int)
TEXT ·dqRowsInt4BF16(SB), NOSPLIT, $0-48
	ROWS(LOAD4, LOAD16x4, STOREBF16, STORE16BF16)

// func dqRowsInt4F16(dst, codes unsafe.Pointer, sc, of *float32, n, m int)
TEXT ·dqRowsInt4F16(SB), NOSPLIT, $0-48
	ROWS(LOAD4, LOAD16x4, STOREF16, STORE16F16)

// func dqRowsInt4F32(dst, codes unsafe.Pointer, sc, of *float32, n, m int)
TEXT ·dqRowsInt4F32(SB), NOSPLIT, $0-48
	ROWS(LOAD4, LOAD16x4, STOREF32, STORE16F32)

// func dqGroupsInt8BF16(dst, codes unsafe.Pointer, sc, of *float32, n, m int)
TEXT ·dqGroupsInt8BF16(SB), NOSPLIT, $0-48
	GROUPS(LOAD8, LOAD16x8, STOREBF16, STORE16BF16)

// func dqGroupsInt8F16(dst, codes unsafe.Pointer, sc, of *float32, n, m int)
TEXT ·dqGroupsInt8F16(SB), NOSPLIT, $0-48
	GROUPS(LOAD8, LOAD16x8, STOREF16, STORE16F16)

// func dqGroupsInt8F32(dst, codes unsafe.Pointer, sc, of *float32, n, m int)
TEXT ·dqGroupsInt8F32(SB), NOSPLIT, $0-48
	GROUPS(LOAD8, LOAD16x8, STOREF32, STORE16F32)

// func dqGroupsInt4BF16(dst, codes unsafe.Pointer, sc, of *float32, n, m int)
TEXT ·dqGroupsInt4BF16(SB), NOSPLIT, $0-48
	GROUPS(LOAD4, LOAD16x4, STOREBF16, STORE16BF16)

// func dqGroupsInt4F16(dst, codes unsafe.Pointer, sc, of *float32, n, m int)
TEXT ·dqGroupsInt4F16(SB), NOSPLIT, $0-48
	GROUPS(LOAD4, LOAD16x4, STOREF16, STORE16F16)

// func dqGroupsInt4F32(dst, codes unsafe.Pointer, sc, of *float32, n, m int)
TEXT ·dqGroupsInt4F32(SB), NOSPLIT, $0-48
	GROUPS(LOAD4, LOAD16x4, STOREF32, STORE16F32)

// func dqParamsF16(sc, of *float32, s, o unsafe.Pointer, n int, qmax, lim float32) bool
TEXT ·dqParamsF16(SB), NOSPLIT, $0-49
	PARAMS(LOADSF16, LOADOF16)

// func dqParamsF32(sc, of *float32, s, o unsafe.Pointer, n int, qmax, lim float32) bool
TEXT ·dqParamsF32(SB), NOSPLIT, $0-49
	PARAMS(LOADSF32, LOADOF32)
