//go:build amd64 && !purego

#include "textflag.h"

// func(dst, src unsafe.Pointer, rows, rb, ds, ss int): rows rows of rb
// bytes, rb a multiple of 32, rows >= 1; row i from src + i*ss to
// dst + i*ds. A row goes 64 bytes at a time, then a last 32 when rb is an
// odd multiple of 32.
//
// Registers: DI dst row, SI src row, CX rows left, R8 rb, R9 ds, R10 ss,
// R11 = rb rounded down to 64, AX byte index.

#define ARGS \
	MOVQ dst+0(FP), DI; \
	MOVQ src+8(FP), SI; \
	MOVQ rows+16(FP), CX; \
	MOVQ rb+24(FP), R8; \
	MOVQ ds+32(FP), R9; \
	MOVQ ss+40(FP), R10; \
	MOVQ R8, R11; \
	ANDQ $~63, R11

#define BODY(ST) \
row: \
	XORQ AX, AX; \
	CMPQ R11, $0; \
	JEQ tail; \
loop: \
	VMOVDQU (SI)(AX*1), Y0; \
	VMOVDQU 32(SI)(AX*1), Y1; \
	ST Y0, (DI)(AX*1); \
	ST Y1, 32(DI)(AX*1); \
	ADDQ $64, AX; \
	CMPQ AX, R11; \
	JLT loop; \
tail: \
	CMPQ AX, R8; \
	JGE next; \
	VMOVDQU (SI)(AX*1), Y0; \
	ST Y0, (DI)(AX*1); \
next: \
	ADDQ R9, DI; \
	ADDQ R10, SI; \
	DECQ CX; \
	JNZ row

// func copyRowsAVX2(dst, src unsafe.Pointer, rows, rb, ds, ss int)
TEXT ·copyRowsAVX2(SB), NOSPLIT, $0-48
	ARGS
	BODY(VMOVDQU)
	VZEROUPPER
	RET

// func streamRowsAVX2(dst, src unsafe.Pointer, rows, rb, ds, ss int)
TEXT ·streamRowsAVX2(SB), NOSPLIT, $0-48
	ARGS
	BODY(VMOVNTDQ)
	VZEROUPPER
	RET

// func Fence()
TEXT ·Fence(SB), NOSPLIT, $0-0
	SFENCE
	RET

// func prefetch(p unsafe.Pointer, rows, rb, stride int)
TEXT ·prefetch(SB), NOSPLIT, $0-32
	MOVQ p+0(FP), SI
	MOVQ rows+8(FP), CX
	MOVQ rb+16(FP), R8
	MOVQ stride+24(FP), R10
prow:
	XORQ AX, AX
ploop:
	PREFETCHT0 (SI)(AX*1)
	ADDQ $64, AX
	CMPQ AX, R8
	JLT ploop
	ADDQ R10, SI
	DECQ CX
	JNZ prow
	RET


