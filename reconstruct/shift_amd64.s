//go:build amd64 && !purego

#include "textflag.h"

// AVX2 kernels for Shift. Each rotates rows rows of hd elements, row i read
// at src + i*ss and written at dst + i*ds (byte strides), in place or out of
// place, with exactly the operations of the Go shiftPair (two rounded
// products, then one add or subtract; no FMA), so results are bit-identical
// to the portable code. Pass-through dimensions past the rotated ones are
// left to the caller. All take
//
//	func(dst, src unsafe.Pointer, rows, ds, ss, n int, c, s *float32)
//
// Half kernels (rotate-half): pair j is (j, j+n); c and s hold n values.
// Pair kernels (interleaved): pair j is (2j, 2j+1) within the first n dims;
// c holds (c0, c0, c1, c1, ...) and s holds (-s0, s0, -s1, s1, ...).
// n is a multiple of 8 for f16 and f32, of 16 for bf16 (whose c and s are
// also permuted, see below). rows >= 1.
//
// Registers: DI dst row, SI src row, CX rows left, DX dst stride, R8 src
// stride, BX = n, R9 = n in bytes (offset of the second half), R10 c, R11 s,
// R12/R13 second halves of the src/dst row, AX element index; Y0-Y10 math
// and scratch, Y11-Y15 bf16 constants.

#define ARGS(shift) \
	MOVQ dst+0(FP), DI; \
	MOVQ src+8(FP), SI; \
	MOVQ rows+16(FP), CX; \
	MOVQ ds+24(FP), DX; \
	MOVQ ss+32(FP), R8; \
	MOVQ n+40(FP), BX; \
	MOVQ BX, R9; \
	SHLQ $shift, R9; \
	MOVQ c+48(FP), R10; \
	MOVQ s+56(FP), R11

// NEXTROW steps to the next row and loops while rows are left.
#define NEXTROW \
	ADDQ R8, SI; \
	ADDQ DX, DI; \
	DECQ CX; \
	JNZ row

// Loads of 8 elements at element index AX into a Y register of float32.
#define LOADF16(base, y) \
	VCVTPH2PS (base)(AX*2), y
#define LOADF32(base, y) \
	VMOVUPS (base)(AX*4), y

// Stores of 8 float32 in register y rounded to nearest even (x is scratch).
#define STOREF16(y, x, base) \
	VCVTPS2PH $0, y, (base)(AX*2)
#define STOREF32(y, x, base) \
	VMOVUPS y, (base)(AX*4)

// ROTHALF: (Y0, Y1) = (x1, x2) -> Y4 = x1*c - x2*s, Y6 = x2*c + x1*s.
#define ROTHALF \
	VMOVUPS (R10)(AX*4), Y2; \
	VMOVUPS (R11)(AX*4), Y3; \
	VMULPS Y2, Y0, Y4; \
	VMULPS Y3, Y1, Y5; \
	VSUBPS Y5, Y4, Y4; \
	VMULPS Y2, Y1, Y6; \
	VMULPS Y3, Y0, Y7; \
	VADDPS Y7, Y6, Y6

// ROTPAIRS: Y0 = (a0, b0, a1, b1, ...) -> Y4 = x*c + swap(x)*s.
#define ROTPAIRS \
	VPERMILPS $0xb1, Y0, Y1; \
	VMOVUPS (R10)(AX*4), Y2; \
	VMOVUPS (R11)(AX*4), Y3; \
	VMULPS Y2, Y0, Y4; \
	VMULPS Y3, Y1, Y5; \
	VADDPS Y5, Y4, Y4

#define HALFBODY(LOAD, STORE) \
row: \
	LEAQ (SI)(R9*1), R12; \
	LEAQ (DI)(R9*1), R13; \
	XORQ AX, AX; \
loop: \
	LOAD(SI, Y0); \
	LOAD(R12, Y1); \
	ROTHALF; \
	STORE(Y4, X4, DI); \
	STORE(Y6, X6, R13); \
	ADDQ $8, AX; \
	CMPQ AX, BX; \
	JLT loop; \
	NEXTROW; \
	VZEROUPPER; \
	RET

#define PAIRBODY(LOAD, STORE) \
row: \
	XORQ AX, AX; \
loop: \
	LOAD(SI, Y0); \
	ROTPAIRS; \
	STORE(Y4, X4, DI); \
	ADDQ $8, AX; \
	CMPQ AX, BX; \
	JLT loop; \
	NEXTROW; \
	VZEROUPPER; \
	RET

// func shiftHalfF16AVX2(dst, src unsafe.Pointer, rows, ds, ss, n int, c, s *float32)
TEXT ·shiftHalfF16AVX2(SB), NOSPLIT, $0-64
	ARGS(1)
	HALFBODY(LOADF16, STOREF16)

// func shiftHalfF32AVX2(dst, src unsafe.Pointer, rows, ds, ss, n int, c, s *float32)
TEXT ·shiftHalfF32AVX2(SB), NOSPLIT, $0-64
	ARGS(2)
	HALFBODY(LOADF32, STOREF32)

// func shiftPairsF16AVX2(dst, src unsafe.Pointer, rows, ds, ss, n int, c, s *float32)
TEXT ·shiftPairsF16AVX2(SB), NOSPLIT, $0-64
	ARGS(1)
	PAIRBODY(LOADF16, STOREF16)

// func shiftPairsF32AVX2(dst, src unsafe.Pointer, rows, ds, ss, n int, c, s *float32)
TEXT ·shiftPairsF32AVX2(SB), NOSPLIT, $0-64
	ARGS(2)
	PAIRBODY(LOADF32, STOREF32)

// The bf16 kernels take 16 elements (32 bytes) at a time. Unpacking the words
// against zero gives two vectors of float32 whose lanes hold elements
// (0-3, 8-11) and (4-7, 12-15); the caller permutes c and s the same way
// (middle quads of every 16 swapped), and VPACKUSDW undoes the permutation
// on the way out. A block whose input holds an infinity or NaN (exponent all
// ones) takes the slow path, whose rounding keeps NaN a NaN as
// format.F32ToBF16 does; finite inputs and |c|, |s| <= 1 never make a NaN.
//
// Constants: Y11 = 1 (dword), Y12 = 0x7fff (dword), Y13 = 0x7f80 (word),
// Y14 = 0x40 (dword), Y15 = 0.

#define BF16CONSTS \
	MOVL $1, AX; \
	VMOVD AX, X11; \
	VPBROADCASTD X11, Y11; \
	MOVL $0x7fff, AX; \
	VMOVD AX, X12; \
	VPBROADCASTD X12, Y12; \
	MOVL $0x7f80, AX; \
	VMOVD AX, X13; \
	VPBROADCASTW X13, Y13; \
	MOVL $0x40, AX; \
	VMOVD AX, X14; \
	VPBROADCASTD X14, Y14; \
	VPXOR Y15, Y15, Y15

// NONFINITE16 clears ZF when a word of a or b has an all-ones exponent.
#define NONFINITE16(a, b) \
	VPAND Y13, a, Y10; \
	VPAND Y13, b, Y7; \
	VPMAXUW Y7, Y10, Y10; \
	VPCMPEQW Y13, Y10, Y10; \
	VPTEST Y10, Y10

// RNE16 rounds the float32 in y to bf16 in the low word of each dword:
// (b + 0x7fff + (b>>16 & 1)) >> 16. t is scratch.
#define RNE16(y, t) \
	VPSRLD $16, y, t; \
	VPAND Y11, t, t; \
	VPADDD Y12, y, y; \
	VPADDD t, y, y; \
	VPSRLD $16, y, y

// RNE16NAN is RNE16 giving (b>>16) | 0x40 for a NaN. t1-t3 are scratch.
#define RNE16NAN(y, t1, t2, t3) \
	VPSRLD $16, y, t1; \
	VPAND Y11, t1, t2; \
	VCMPPS $3, y, y, t3; \
	VPADDD Y12, y, y; \
	VPADDD t2, y, y; \
	VPSRLD $16, y, y; \
	VPOR Y14, t1, t1; \
	VPBLENDVB t3, t1, y, y

// HALF16: raw x1 in Y8, x2 in Y9 (16 words each) -> o1 = x1*c - x2*s in
// (Y6 low lanes, Y0 high lanes), o2 = x2*c + x1*s in (Y2, Y1).
#define HALF16 \
	VPUNPCKLWD Y8, Y15, Y0; \
	VPUNPCKHWD Y8, Y15, Y1; \
	VPUNPCKLWD Y9, Y15, Y2; \
	VPUNPCKHWD Y9, Y15, Y3; \
	VMOVUPS (R10)(AX*4), Y4; \
	VMOVUPS (R11)(AX*4), Y5; \
	VMULPS Y4, Y0, Y6; \
	VMULPS Y5, Y2, Y7; \
	VSUBPS Y7, Y6, Y6; \
	VMULPS Y4, Y2, Y7; \
	VMULPS Y5, Y0, Y0; \
	VADDPS Y0, Y7, Y2; \
	VMOVUPS 32(R10)(AX*4), Y4; \
	VMOVUPS 32(R11)(AX*4), Y5; \
	VMULPS Y4, Y1, Y0; \
	VMULPS Y5, Y3, Y7; \
	VSUBPS Y7, Y0, Y0; \
	VMULPS Y4, Y3, Y7; \
	VMULPS Y5, Y1, Y1; \
	VADDPS Y1, Y7, Y1

// Stores of 16 bf16 words in register y at element index AX.
#define STBF16(y, base) \
	VMOVDQU y, (base)(AX*2)

#define HALFBF16BODY(ST) \
	BF16CONSTS; \
row: \
	LEAQ (SI)(R9*1), R12; \
	LEAQ (DI)(R9*1), R13; \
	XORQ AX, AX; \
loop: \
	VMOVDQU (SI)(AX*2), Y8; \
	VMOVDQU (R12)(AX*2), Y9; \
	NONFINITE16(Y8, Y9); \
	JNZ slow; \
	HALF16; \
	RNE16(Y6, Y7); \
	RNE16(Y0, Y7); \
	VPACKUSDW Y0, Y6, Y6; \
	ST(Y6, DI); \
	RNE16(Y2, Y7); \
	RNE16(Y1, Y7); \
	VPACKUSDW Y1, Y2, Y2; \
	ST(Y2, R13); \
next: \
	ADDQ $16, AX; \
	CMPQ AX, BX; \
	JLT  loop; \
	NEXTROW; \
	VZEROUPPER; \
	RET; \
slow: \
	HALF16; \
	RNE16NAN(Y6, Y3, Y4, Y5); \
	RNE16NAN(Y0, Y3, Y4, Y5); \
	VPACKUSDW Y0, Y6, Y6; \
	ST(Y6, DI); \
	RNE16NAN(Y2, Y3, Y4, Y5); \
	RNE16NAN(Y1, Y3, Y4, Y5); \
	VPACKUSDW Y1, Y2, Y2; \
	ST(Y2, R13); \
	JMP next

// func shiftHalfBF16AVX2(dst, src unsafe.Pointer, rows, ds, ss, n int, c, s *float32)
// n is a multiple of 16; c and s are permuted per 16 pairs.
TEXT ·shiftHalfBF16AVX2(SB), NOSPLIT, $0-64
	ARGS(1)
	HALFBF16BODY(STBF16)

// PAIRS16: raw x in Y8 (16 words, interleaved pairs) -> x*c + swap(x)*s in
// (Y0 low lanes, Y1 high lanes).
#define PAIRS16 \
	VPUNPCKLWD Y8, Y15, Y0; \
	VPUNPCKHWD Y8, Y15, Y1; \
	VPERMILPS $0xb1, Y0, Y2; \
	VPERMILPS $0xb1, Y1, Y3; \
	VMULPS (R10)(AX*4), Y0, Y0; \
	VMULPS (R11)(AX*4), Y2, Y2; \
	VADDPS Y2, Y0, Y0; \
	VMULPS 32(R10)(AX*4), Y1, Y1; \
	VMULPS 32(R11)(AX*4), Y3, Y3; \
	VADDPS Y3, Y1, Y1

#define PAIRSBF16BODY(ST) \
	BF16CONSTS; \
row: \
	XORQ AX, AX; \
loop: \
	VMOVDQU (SI)(AX*2), Y8; \
	NONFINITE16(Y8, Y8); \
	JNZ slow; \
	PAIRS16; \
	RNE16(Y0, Y7); \
	RNE16(Y1, Y7); \
	VPACKUSDW Y1, Y0, Y0; \
	ST(Y0, DI); \
next: \
	ADDQ $16, AX; \
	CMPQ AX, BX; \
	JLT  loop; \
	NEXTROW; \
	VZEROUPPER; \
	RET; \
slow: \
	PAIRS16; \
	RNE16NAN(Y0, Y3, Y4, Y5); \
	RNE16NAN(Y1, Y3, Y4, Y5); \
	VPACKUSDW Y1, Y0, Y0; \
	ST(Y0, DI); \
	JMP next

// func shiftPairsBF16AVX2(dst, src unsafe.Pointer, rows, ds, ss, n int, c, s *float32)
// n is a multiple of 16; c and s are expanded per element and permuted per 16.
TEXT ·shiftPairsBF16AVX2(SB), NOSPLIT, $0-64
	ARGS(1)
	PAIRSBF16BODY(STBF16)

// The AVX-512 rotate-half bf16 kernels take 32 pairs (64 bytes of each
// half) at a time with the same operations, constants and rounding as
// HALFBF16BODY on Z registers; unpacking against zero lays a 512-bit
// vector's lanes out as elements (0-3, 8-11, 16-19, 24-27) and (4-7, 12-15,
// 20-23, 28-31), and the caller permutes c and s that way per 32 pairs
// (shiftPermute32). n is a multiple of 32. The NT kernels store with
// VMOVNTDQ and need dst, ds and n*2 multiples of 64; they issue no fence:
// the caller orders the stores (Fence) before another goroutine reads them.
//
// Two roundings share the body (HALFBF16BODY512):
//   - integer (shiftHalfBF16AVX512): RNE32 as RNE16, a block with a NaN or
//     infinite input (NONFINITE32) taking the slow path;
//   - AVX512_BF16 (shiftHalfBF16CVT): VCVTNE2PS2BF16, which rounds to
//     nearest even too but flushes subnormal results to zero and quiets
//     NaNs its own way, so a block with a subnormal or NaN result
//     (SPECIAL32) takes the slow path. The instruction puts its second
//     source's 16 words below its first's: with the lane order of the
//     unpacked vectors that is quads 0, 2, 4, 6, 1, 3, 5, 7, which VPERMQ
//     by shiftQuads (Z16) puts back in order. The Go assembler does not
//     know VCVTNE2PS2BF16; it is written out as bytes (encodings checked
//     with GNU as).
// The slow path rounds the same products with RNE32NAN.
//
// Constants: Z11 = 1 (dword), Z12 = 0x7fff (dword), Z13 = 0x7f80 (word),
// Z14 = 0x40 (dword), Z15 = 0, Z16 = shiftQuads.

DATA shiftQuads<>+0(SB)/8, $0
DATA shiftQuads<>+8(SB)/8, $4
DATA shiftQuads<>+16(SB)/8, $1
DATA shiftQuads<>+24(SB)/8, $5
DATA shiftQuads<>+32(SB)/8, $2
DATA shiftQuads<>+40(SB)/8, $6
DATA shiftQuads<>+48(SB)/8, $3
DATA shiftQuads<>+56(SB)/8, $7
GLOBL shiftQuads<>(SB), RODATA|NOPTR, $64

#define BF16CONSTS512 \
	MOVL $1, AX; \
	VPBROADCASTD AX, Z11; \
	MOVL $0x7fff, AX; \
	VPBROADCASTD AX, Z12; \
	MOVL $0x7f807f80, AX; \
	VPBROADCASTD AX, Z13; \
	MOVL $0x40, AX; \
	VPBROADCASTD AX, Z14; \
	VPXORD Z15, Z15, Z15; \
	VMOVDQU64 shiftQuads<>(SB), Z16

#define RNE32(y, t) \
	VPSRLD $16, y, t; \
	VPANDD Z11, t, t; \
	VPADDD Z12, y, y; \
	VPADDD t, y, y; \
	VPSRLD $16, y, y

// RNE32NAN is RNE32 giving (b>>16) | 0x40 for a NaN; t1, t2 scratch.
#define RNE32NAN(y, t1, t2) \
	VPSRLD $16, y, t1; \
	VPANDD Z11, t1, t2; \
	VCMPPS $3, y, y, K2; \
	VPADDD Z12, y, y; \
	VPADDD t2, y, y; \
	VPSRLD $16, y, y; \
	VPORD Z14, t1, t1; \
	VMOVDQU32 t1, K2, y

// HALF32: raw x1 in Z8, x2 in Z9 (32 words each) -> o1 = x1*c - x2*s in
// (Z6 low lanes, Z0 high lanes), o2 = x2*c + x1*s in (Z2, Z1).
#define HALF32 \
	VPUNPCKLWD Z8, Z15, Z0; \
	VPUNPCKHWD Z8, Z15, Z1; \
	VPUNPCKLWD Z9, Z15, Z2; \
	VPUNPCKHWD Z9, Z15, Z3; \
	VMOVUPS (R10)(AX*4), Z4; \
	VMOVUPS (R11)(AX*4), Z5; \
	VMULPS Z4, Z0, Z6; \
	VMULPS Z5, Z2, Z7; \
	VSUBPS Z7, Z6, Z6; \
	VMULPS Z4, Z2, Z7; \
	VMULPS Z5, Z0, Z0; \
	VADDPS Z0, Z7, Z2; \
	VMOVUPS 64(R10)(AX*4), Z4; \
	VMOVUPS 64(R11)(AX*4), Z5; \
	VMULPS Z4, Z1, Z0; \
	VMULPS Z5, Z3, Z7; \
	VSUBPS Z7, Z0, Z0; \
	VMULPS Z4, Z3, Z7; \
	VMULPS Z5, Z1, Z1; \
	VADDPS Z1, Z7, Z1

#define ST512(y, base) \
	VMOVDQU64 y, (base)(AX*2)
#define ST512NT(y, base) \
	VMOVNTDQ y, (base)(AX*2)

// Integer rounding: PRE sets K1 to the words of Z8 or Z9 with an all-ones
// exponent; ROUND rounds and stores the results.
#define NONFINITE32 \
	VPANDD Z13, Z8, Z10; \
	VPANDD Z13, Z9, Z7; \
	VPMAXUW Z7, Z10, Z10; \
	VPCMPEQW Z13, Z10, K1; \
	KORTESTD K1, K1
#define ROUNDINT(ST) \
	RNE32(Z6, Z7); \
	RNE32(Z0, Z7); \
	VPACKUSDW Z0, Z6, Z6; \
	ST(Z6, DI); \
	RNE32(Z2, Z7); \
	RNE32(Z1, Z7); \
	VPACKUSDW Z1, Z2, Z2; \
	ST(Z2, R13)

// AVX512_BF16 rounding: POST sets K1 to the lanes of the four results
// that are NaN or subnormal; ROUND converts and stores them.
// vcvtne2ps2bf16 zmm6, zmm0, zmm6: Z6 = bf16(Z6) below bf16(Z0).
#define CVT60 BYTE $0x62; BYTE $0xf2; BYTE $0x7f; BYTE $0x48; BYTE $0x72; BYTE $0xf6
// vcvtne2ps2bf16 zmm2, zmm1, zmm2: Z2 = bf16(Z2) below bf16(Z1).
#define CVT21 BYTE $0x62; BYTE $0xf2; BYTE $0x77; BYTE $0x48; BYTE $0x72; BYTE $0xd2
#define SPECIAL32 \
	VFPCLASSPSZ $0xa1, Z6, K1; \
	VFPCLASSPSZ $0xa1, Z0, K2; \
	KORW K2, K1, K1; \
	VFPCLASSPSZ $0xa1, Z2, K2; \
	KORW K2, K1, K1; \
	VFPCLASSPSZ $0xa1, Z1, K2; \
	KORW K2, K1, K1; \
	KORTESTW K1, K1
#define ROUNDCVT(ST) \
	CVT60; \
	VPERMQ Z6, Z16, Z6; \
	ST(Z6, DI); \
	CVT21; \
	VPERMQ Z2, Z16, Z2; \
	ST(Z2, R13)

// HALFBF16BODY512: PRE (before the products) or POST (after them) sets
// the flags, nonzero taking the slow path; ROUND rounds and stores with ST.
#define NOCHECK
#define HALFBF16BODY512(ST, PRE, POST, ROUND) \
	BF16CONSTS512; \
row: \
	LEAQ (SI)(R9*1), R12; \
	LEAQ (DI)(R9*1), R13; \
	XORQ AX, AX; \
loop: \
	VMOVDQU64 (SI)(AX*2), Z8; \
	VMOVDQU64 (R12)(AX*2), Z9; \
	PRE; \
	HALF32; \
	POST; \
	JNZ slow; \
	ROUND(ST); \
next: \
	ADDQ $32, AX; \
	CMPQ AX, BX; \
	JLT  loop; \
	NEXTROW; \
	VZEROUPPER; \
	RET; \
slow: \
	RNE32NAN(Z6, Z3, Z4); \
	RNE32NAN(Z0, Z3, Z4); \
	VPACKUSDW Z0, Z6, Z6; \
	ST(Z6, DI); \
	RNE32NAN(Z2, Z3, Z4); \
	RNE32NAN(Z1, Z3, Z4); \
	VPACKUSDW Z1, Z2, Z2; \
	ST(Z2, R13); \
	JMP next

// func shiftHalfBF16AVX512(dst, src unsafe.Pointer, rows, ds, ss, n int, c, s *float32)
TEXT ·shiftHalfBF16AVX512(SB), NOSPLIT, $0-64
	ARGS(1)
	HALFBF16BODY512(ST512, NONFINITE32, NOCHECK, ROUNDINT)

// func shiftHalfBF16AVX512NT(dst, src unsafe.Pointer, rows, ds, ss, n int, c, s *float32)
TEXT ·shiftHalfBF16AVX512NT(SB), NOSPLIT, $0-64
	ARGS(1)
	HALFBF16BODY512(ST512NT, NONFINITE32, NOCHECK, ROUNDINT)

// func shiftHalfBF16CVT(dst, src unsafe.Pointer, rows, ds, ss, n int, c, s *float32)
TEXT ·shiftHalfBF16CVT(SB), NOSPLIT, $0-64
	ARGS(1)
	HALFBF16BODY512(ST512, NOCHECK, SPECIAL32, ROUNDCVT)

// func shiftHalfBF16CVTNT(dst, src unsafe.Pointer, rows, ds, ss, n int, c, s *float32)
TEXT ·shiftHalfBF16CVTNT(SB), NOSPLIT, $0-64
	ARGS(1)
	HALFBF16BODY512(ST512NT, NOCHECK, SPECIAL32, ROUNDCVT)
