//go:build amd64 && !purego

#include "textflag.h"

// Folding CRC32C kernels; the package comment derives the method and the
// constants. All take and return a CRC as Update does (inverted in, out).
// All need len >= 64; copy's dst has src's length and does not overlap it.
//
// Registers: AX the CRC register, SI src, DI dst (in updateAVX512's
// blocks: the streams), CX bytes left, BX ·foldK, DX and R8 scratch (in
// the blocks: DX the step count, R8-R13 the stream registers, R14 the
// prefetch pointer). AVX-512:
// Z0-Z3 accumulators, Z4-Z7 products, Z8 the 256-byte constants, Z9 the
// 64-byte ones, Z11 the fold over a block's streams, Z12 the constants of
// a block's first step, Z10, X13 and X14 the block's stream registers,
// Z16-Z19 copied data. SSE: X1-X4 accumulators, X0 constants, X5-X8
// products, X9-X12 data.

// Byte offsets into ·foldK.
#define K2048 0
#define K512 16
#define K128 32
#define KLANES 48
#define KBLOCK 112
#define KSTREAM 128
#define KJUMP 224
#define KSTREAMS 240

// The hybrid block (foldk.go's blockIters, blockStreams, blockStream,
// blockBytes): BLOCKITERS steps of 256 bytes (VECBYTES), then six streams
// of STREAM bytes.
#define BLOCKITERS 32
#define STREAM 1280
#define BLOCKBYTES 15872
#define VECBYTES 8192

// updateSSE's blocks: BLOCKITERS steps of 64 bytes, then the same streams.
#define SSEBLOCKBYTES 9728
#define SSEVECBYTES 2048

// Prefetch distances in updateSSE's blocks, for the folded bytes and each
// stream.
#define PFV 1024
#define PFS 256

// PFAHEAD is how far ahead of a block's bytes updateAVX512 prefetches
// them: R14 runs through the input at the block's pace (STEPBYTES a step)
// PFAHEAD bytes ahead of it, so the seven places a step reads all find
// their lines in L1, fetched in the order the input lies in memory (near
// the end it runs past the input: a prefetch does not fault). On 2 MiB
// inputs, which come from L3, the median of paired runs of both kernels
// rose about 10% against prefetching each of the seven PFV and PFS ahead
// (9-14 KiB measured alike; 32 KiB, more than L1 holds beside the block,
// fell below it). PREFETCHT1 or T2 instead of T0 lost about 20% of the
// median, and so did a second pointer with PREFETCHT1 or T2 32-64 KiB
// ahead (20-25%); prefetching the first 12 KiB before the first block
// gained nothing.
#define PFAHEAD 12288
#define STEPBYTES 496

// HYBRIDSTEP is one step of a hybrid block: 256 bytes folded with the
// constants in k, 40 bytes of each stream summed, the prefetch.
#define HYBRIDSTEP(k) \
	PREFETCHT0 0(R14); \
	PREFETCHT0 64(R14); \
	PREFETCHT0 128(R14); \
	PREFETCHT0 192(R14); \
	PREFETCHT0 256(R14); \
	PREFETCHT0 320(R14); \
	PREFETCHT0 384(R14); \
	PREFETCHT0 448(R14); \
	FOLDZ(k, 0(SI), Z0, Z4); \
	STREAMSTEP(0); \
	FOLDZ(k, 64(SI), Z1, Z5); \
	STREAMSTEP(8); \
	STREAMSTEP(16); \
	FOLDZ(k, 128(SI), Z2, Z6); \
	STREAMSTEP(24); \
	FOLDZ(k, 192(SI), Z3, Z7); \
	STREAMSTEP(32); \
	ADDQ $256, SI; \
	ADDQ $40, DI; \
	ADDQ $STEPBYTES, R14

// STREAMSTEP sums 8 bytes at off of each of the six streams at DI into
// R8-R13.
#define STREAMSTEP(off) \
	CRC32Q off(DI), R8; \
	CRC32Q 1*STREAM+off(DI), R9; \
	CRC32Q 2*STREAM+off(DI), R10; \
	CRC32Q 3*STREAM+off(DI), R11; \
	CRC32Q 4*STREAM+off(DI), R12; \
	CRC32Q 5*STREAM+off(DI), R13

// STREAMPREFETCH prefetches PFS ahead in each stream.
#define STREAMPREFETCH \
	PREFETCHT0 PFS(DI); \
	PREFETCHT0 1*STREAM+PFS(DI); \
	PREFETCHT0 2*STREAM+PFS(DI); \
	PREFETCHT0 3*STREAM+PFS(DI); \
	PREFETCHT0 4*STREAM+PFS(DI); \
	PREFETCHT0 5*STREAM+PFS(DI)

// FOLDZ folds each 128-bit lane of acc forward by the distance of k and
// adds data: acc = acc.lo*k.lo ^ acc.hi*k.hi ^ data. Works on X, Y or Z.
#define FOLDZ(k, data, acc, tmp) \
	VPCLMULQDQ $0x00, k, acc, tmp; \
	VPCLMULQDQ $0x11, k, acc, acc; \
	VPTERNLOGQ $0x96, data, tmp, acc

// LANES folds the four lanes of Z0 into X0: lane 0 by 48 bytes, lane 1 by
// 32, lane 2 by 16, added to lane 3.
#define LANES \
	VMOVDQU64     KLANES(BX), Z10; \
	VPCLMULQDQ    $0x00, Z10, Z0, Z4; \
	VPCLMULQDQ    $0x11, Z10, Z0, Z5; \
	VEXTRACTI32X4 $3, Z0, X6; \
	VPTERNLOGQ    $0x96, Z4, Z5, Z6; \
	VEXTRACTI64X4 $1, Z6, Y7; \
	VPXORQ        Y7, Y6, Y6; \
	VEXTRACTI128  $1, Y6, X7; \
	VPXOR         X7, X6, X0

// FINAL128 turns the 128 bits left in x into the CRC register AX: they are
// a 16-byte message whose CRC from a zero register is the answer.
#define FINAL128(x) \
	VMOVQ   x, DX; \
	VPEXTRQ $1, x, R8; \
	XORL    AX, AX; \
	CRC32Q  DX, AX; \
	CRC32Q  R8, AX

// SUMTAIL adds the last CX < 16 bytes at SI to AX with the CRC32
// instruction.
#define SUMTAIL \
	CMPQ   CX, $8; \
	JB     tail4; \
	CRC32Q 0(SI), AX; \
	ADDQ   $8, SI; \
	SUBQ   $8, CX; \
tail4: \
	CMPQ   CX, $4; \
	JB     tail2; \
	CRC32L 0(SI), AX; \
	ADDQ   $4, SI; \
	SUBQ   $4, CX; \
tail2: \
	CMPQ   CX, $2; \
	JB     tail1; \
	CRC32W 0(SI), AX; \
	ADDQ   $2, SI; \
	SUBQ   $2, CX; \
tail1: \
	TESTQ  CX, CX; \
	JZ     tail0; \
	CRC32B 0(SI), AX; \
tail0:

// COPYTAIL is SUMTAIL that also copies the bytes to DI (which does not
// overlap SI, so the CRC reads them from SI after the store).
#define COPYTAIL \
	CMPQ   CX, $8; \
	JB     tail4; \
	MOVQ   0(SI), DX; \
	MOVQ   DX, 0(DI); \
	CRC32Q DX, AX; \
	ADDQ   $8, SI; \
	ADDQ   $8, DI; \
	SUBQ   $8, CX; \
tail4: \
	CMPQ   CX, $4; \
	JB     tail2; \
	MOVL   0(SI), DX; \
	MOVL   DX, 0(DI); \
	CRC32L 0(SI), AX; \
	ADDQ   $4, SI; \
	ADDQ   $4, DI; \
	SUBQ   $4, CX; \
tail2: \
	CMPQ   CX, $2; \
	JB     tail1; \
	MOVW   0(SI), DX; \
	MOVW   DX, 0(DI); \
	CRC32W 0(SI), AX; \
	ADDQ   $2, SI; \
	ADDQ   $2, DI; \
	SUBQ   $2, CX; \
tail1: \
	TESTQ  CX, CX; \
	JZ     tail0; \
	MOVB   0(SI), DX; \
	MOVB   DX, 0(DI); \
	CRC32B 0(SI), AX; \
tail0:

// func updateAVX512(crc uint32, p []byte) uint32
TEXT ·updateAVX512(SB), NOSPLIT, $0-36
	MOVL crc+0(FP), AX
	MOVQ p_base+8(FP), SI
	MOVQ p_len+16(FP), CX
	LEAQ ·foldK(SB), BX
	NOTL AX
	CMPQ CX, $256
	JAE  wide

	// Under 256 bytes: one accumulator, the register added to it.
	VMOVD           AX, X4
	VPXORQ          0(SI), Z4, Z0
	ADDQ            $64, SI
	SUBQ            $64, CX
	VBROADCASTI32X4 K512(BX), Z9
	JMP             loop64

wide:
	// The first 256 bytes, the register added to the first 4.
	VMOVD           AX, X4
	VPXORQ          0(SI), Z4, Z0
	VMOVDQU64       64(SI), Z1
	VMOVDQU64       128(SI), Z2
	VMOVDQU64       192(SI), Z3
	ADDQ            $256, SI
	SUBQ            $256, CX
	VBROADCASTI32X4 K2048(BX), Z8
	VBROADCASTI32X4 KBLOCK(BX), Z11

	CMPB ·avx512Blocks(SB), $0
	JEQ  loop256

	// Hybrid blocks: the vector unit folds BLOCKITERS steps of 256 bytes
	// while the CRC32 instruction sums the six streams after them from
	// zero (R8-R13). The stream registers, times their constants, join
	// the lanes of Z3 where they stand, before the streams; the
	// accumulators then fold forward over the streams in the next block's
	// first step, with the constant in Z12 (KJUMP instead of K2048), or
	// after the last block with Z11.
	CMPQ      CX, $BLOCKBYTES
	JB        loop256
	LEAQ      PFAHEAD(SI), R14
	VMOVDQA64 Z8, Z12

block:
	LEAQ VECBYTES(SI), DI
	XORL R8, R8
	XORL R9, R9
	XORL R10, R10
	XORL R11, R11
	XORL R12, R12
	XORL R13, R13
	MOVL $(BLOCKITERS-1), DX
	HYBRIDSTEP(Z12)

blockstep:
	HYBRIDSTEP(Z8)
	DECL DX
	JNZ  blockstep

	VMOVQ           R8, X10
	VPINSRQ         $1, R9, X10, X10
	VMOVQ           R10, X13
	VPINSRQ         $1, R11, X13, X13
	VMOVQ           R12, X14
	VPINSRQ         $1, R13, X14, X14
	VINSERTI32X4    $1, X13, Z10, Z10
	VINSERTI32X4    $2, X14, Z10, Z10
	VPCLMULQDQ      $0x00, KSTREAMS(BX), Z10, Z4
	VPCLMULQDQ      $0x11, KSTREAMS(BX), Z10, Z10
	VPTERNLOGQ      $0x96, Z4, Z10, Z3
	VBROADCASTI32X4 KJUMP(BX), Z12
	ADDQ            $(6*STREAM), SI
	SUBQ            $BLOCKBYTES, CX
	CMPQ            CX, $BLOCKBYTES
	JAE             block

	VPCLMULQDQ $0x00, Z11, Z0, Z4
	VPCLMULQDQ $0x11, Z11, Z0, Z0
	VPXORQ     Z4, Z0, Z0
	VPCLMULQDQ $0x00, Z11, Z1, Z5
	VPCLMULQDQ $0x11, Z11, Z1, Z1
	VPXORQ     Z5, Z1, Z1
	VPCLMULQDQ $0x00, Z11, Z2, Z6
	VPCLMULQDQ $0x11, Z11, Z2, Z2
	VPXORQ     Z6, Z2, Z2
	VPCLMULQDQ $0x00, Z11, Z3, Z7
	VPCLMULQDQ $0x11, Z11, Z3, Z3
	VPXORQ     Z7, Z3, Z3

loop256:
	CMPQ  CX, $256
	JB    fold4
	FOLDZ(Z8, 0(SI), Z0, Z4)
	FOLDZ(Z8, 64(SI), Z1, Z5)
	FOLDZ(Z8, 128(SI), Z2, Z6)
	FOLDZ(Z8, 192(SI), Z3, Z7)
	ADDQ  $256, SI
	SUBQ  $256, CX
	JMP   loop256

fold4:
	VBROADCASTI32X4 K512(BX), Z9
	FOLDZ(Z9, Z1, Z0, Z4)
	FOLDZ(Z9, Z2, Z0, Z4)
	FOLDZ(Z9, Z3, Z0, Z4)

loop64:
	CMPQ CX, $64
	JB   lanes
	FOLDZ(Z9, 0(SI), Z0, Z4)
	ADDQ $64, SI
	SUBQ $64, CX
	JMP  loop64

lanes:
	LANES
	VMOVDQU K128(BX), X8

loop16:
	CMPQ CX, $16
	JB   final
	FOLDZ(X8, 0(SI), X0, X4)
	ADDQ $16, SI
	SUBQ $16, CX
	JMP  loop16

final:
	FINAL128(X0)
	SUMTAIL
	NOTL AX
	MOVL AX, ret+32(FP)
	VZEROUPPER
	RET

// func copyAVX512(crc uint32, dst, src []byte) uint32
TEXT ·copyAVX512(SB), NOSPLIT, $0-60
	MOVL crc+0(FP), AX
	MOVQ dst_base+8(FP), DI
	MOVQ src_base+32(FP), SI
	MOVQ src_len+40(FP), CX
	LEAQ ·foldK(SB), BX
	NOTL AX
	CMPQ CX, $256
	JAE  wide

	VMOVDQU64       0(SI), Z0
	VMOVDQU64       Z0, 0(DI)
	VMOVD           AX, X4
	VPXORQ          Z4, Z0, Z0
	ADDQ            $64, SI
	ADDQ            $64, DI
	SUBQ            $64, CX
	VBROADCASTI32X4 K512(BX), Z9
	JMP             loop64

wide:
	VMOVDQU64       0(SI), Z0
	VMOVDQU64       64(SI), Z1
	VMOVDQU64       128(SI), Z2
	VMOVDQU64       192(SI), Z3
	VMOVDQU64       Z0, 0(DI)
	VMOVDQU64       Z1, 64(DI)
	VMOVDQU64       Z2, 128(DI)
	VMOVDQU64       Z3, 192(DI)
	VMOVD           AX, X4
	VPXORQ          Z4, Z0, Z0
	ADDQ            $256, SI
	ADDQ            $256, DI
	SUBQ            $256, CX
	VBROADCASTI32X4 K2048(BX), Z8

loop256:
	CMPQ      CX, $256
	JB        fold4
	VMOVDQU64 0(SI), Z16
	VMOVDQU64 64(SI), Z17
	VMOVDQU64 128(SI), Z18
	VMOVDQU64 192(SI), Z19
	VMOVDQU64 Z16, 0(DI)
	VMOVDQU64 Z17, 64(DI)
	VMOVDQU64 Z18, 128(DI)
	VMOVDQU64 Z19, 192(DI)
	FOLDZ(Z8, Z16, Z0, Z4)
	FOLDZ(Z8, Z17, Z1, Z5)
	FOLDZ(Z8, Z18, Z2, Z6)
	FOLDZ(Z8, Z19, Z3, Z7)
	ADDQ      $256, SI
	ADDQ      $256, DI
	SUBQ      $256, CX
	JMP       loop256

fold4:
	VBROADCASTI32X4 K512(BX), Z9
	FOLDZ(Z9, Z1, Z0, Z4)
	FOLDZ(Z9, Z2, Z0, Z4)
	FOLDZ(Z9, Z3, Z0, Z4)

loop64:
	CMPQ      CX, $64
	JB        lanes
	VMOVDQU64 0(SI), Z16
	VMOVDQU64 Z16, 0(DI)
	FOLDZ(Z9, Z16, Z0, Z4)
	ADDQ      $64, SI
	ADDQ      $64, DI
	SUBQ      $64, CX
	JMP       loop64

lanes:
	LANES
	VMOVDQU K128(BX), X8

loop16:
	CMPQ    CX, $16
	JB      final
	VMOVDQU 0(SI), X9
	VMOVDQU X9, 0(DI)
	FOLDZ(X8, X9, X0, X4)
	ADDQ    $16, SI
	ADDQ    $16, DI
	SUBQ    $16, CX
	JMP     loop16

final:
	FINAL128(X0)
	COPYTAIL
	NOTL AX
	MOVL AX, ret+56(FP)
	VZEROUPPER
	RET

// FOLDX is FOLDZ for one XMM accumulator with SSE instructions:
// acc = acc.lo*k.lo ^ acc.hi*k.hi ^ data.
#define FOLDX(k, data, acc, tmp) \
	MOVO      acc, tmp; \
	PCLMULQDQ $0x00, k, acc; \
	PCLMULQDQ $0x11, k, tmp; \
	PXOR      tmp, acc; \
	PXOR      data, acc

// FOLDX0 is FOLDX without data.
#define FOLDX0(k, acc, tmp) \
	MOVO      acc, tmp; \
	PCLMULQDQ $0x00, k, acc; \
	PCLMULQDQ $0x11, k, tmp; \
	PXOR      tmp, acc

// SSESTREAMREG adds stream register r times its constant at koff to the
// last accumulator, X4.
#define SSESTREAMREG(r, koff) \
	MOVQ      r, X9; \
	MOVOU     koff(BX), X10; \
	PCLMULQDQ $0x00, X10, X9; \
	PXOR      X9, X4

// SSEFINAL is FINAL128 with SSE instructions.
#define SSEFINAL(x) \
	MOVQ   x, DX; \
	PEXTRQ $1, x, R8; \
	XORL   AX, AX; \
	CRC32Q DX, AX; \
	CRC32Q R8, AX

// func updateSSE(crc uint32, p []byte) uint32
TEXT ·updateSSE(SB), NOSPLIT, $0-36
	MOVL  crc+0(FP), AX
	MOVQ  p_base+8(FP), SI
	MOVQ  p_len+16(FP), CX
	LEAQ  ·foldK(SB), BX
	NOTL  AX

	MOVL  AX, X0
	MOVOU 0(SI), X1
	PXOR  X0, X1
	MOVOU 16(SI), X2
	MOVOU 32(SI), X3
	MOVOU 48(SI), X4
	ADDQ  $64, SI
	SUBQ  $64, CX
	MOVOU K512(BX), X0

	// Hybrid blocks as in updateAVX512, with 64-byte steps.
block:
	CMPQ CX, $SSEBLOCKBYTES
	JB   loop64
	LEAQ SSEVECBYTES(SI), DI
	XORL R8, R8
	XORL R9, R9
	XORL R10, R10
	XORL R11, R11
	XORL R12, R12
	XORL R13, R13
	MOVL $BLOCKITERS, DX

blockstep:
	PREFETCHT0 PFV(SI)
	STREAMPREFETCH
	MOVOU      0(SI), X9
	MOVOU      16(SI), X10
	MOVOU      32(SI), X11
	MOVOU      48(SI), X12
	FOLDX(X0, X9, X1, X5)
	STREAMSTEP(0)
	FOLDX(X0, X10, X2, X6)
	STREAMSTEP(8)
	STREAMSTEP(16)
	FOLDX(X0, X11, X3, X7)
	STREAMSTEP(24)
	FOLDX(X0, X12, X4, X8)
	STREAMSTEP(32)
	ADDQ       $64, SI
	ADDQ       $40, DI
	DECL       DX
	JNZ        blockstep

	MOVOU KBLOCK(BX), X13
	FOLDX0(X13, X1, X5)
	FOLDX0(X13, X2, X6)
	FOLDX0(X13, X3, X7)
	FOLDX0(X13, X4, X8)
	SSESTREAMREG(R8, KSTREAM+0)
	SSESTREAMREG(R9, KSTREAM+16)
	SSESTREAMREG(R10, KSTREAM+32)
	SSESTREAMREG(R11, KSTREAM+48)
	SSESTREAMREG(R12, KSTREAM+64)
	SSESTREAMREG(R13, KSTREAM+80)
	ADDQ  $(6*STREAM), SI
	SUBQ  $SSEBLOCKBYTES, CX
	JMP   block

loop64:
	CMPQ  CX, $64
	JB    fold4
	MOVOU 0(SI), X9
	MOVOU 16(SI), X10
	MOVOU 32(SI), X11
	MOVOU 48(SI), X12
	FOLDX(X0, X9, X1, X5)
	FOLDX(X0, X10, X2, X6)
	FOLDX(X0, X11, X3, X7)
	FOLDX(X0, X12, X4, X8)
	ADDQ  $64, SI
	SUBQ  $64, CX
	JMP   loop64

fold4:
	MOVOU K128(BX), X0
	FOLDX(X0, X2, X1, X5)
	FOLDX(X0, X3, X1, X5)
	FOLDX(X0, X4, X1, X5)

loop16:
	CMPQ  CX, $16
	JB    final
	MOVOU 0(SI), X9
	FOLDX(X0, X9, X1, X5)
	ADDQ  $16, SI
	SUBQ  $16, CX
	JMP   loop16

final:
	SSEFINAL(X1)
	SUMTAIL
	NOTL AX
	MOVL AX, ret+32(FP)
	RET

// func copySSE(crc uint32, dst, src []byte) uint32
TEXT ·copySSE(SB), NOSPLIT, $0-60
	MOVL  crc+0(FP), AX
	MOVQ  dst_base+8(FP), DI
	MOVQ  src_base+32(FP), SI
	MOVQ  src_len+40(FP), CX
	LEAQ  ·foldK(SB), BX
	NOTL  AX

	MOVOU 0(SI), X1
	MOVOU 16(SI), X2
	MOVOU 32(SI), X3
	MOVOU 48(SI), X4
	MOVOU X1, 0(DI)
	MOVOU X2, 16(DI)
	MOVOU X3, 32(DI)
	MOVOU X4, 48(DI)
	MOVL  AX, X0
	PXOR  X0, X1
	ADDQ  $64, SI
	ADDQ  $64, DI
	SUBQ  $64, CX
	MOVOU K512(BX), X0

loop64:
	CMPQ  CX, $64
	JB    fold4
	MOVOU 0(SI), X9
	MOVOU 16(SI), X10
	MOVOU 32(SI), X11
	MOVOU 48(SI), X12
	MOVOU X9, 0(DI)
	MOVOU X10, 16(DI)
	MOVOU X11, 32(DI)
	MOVOU X12, 48(DI)
	FOLDX(X0, X9, X1, X5)
	FOLDX(X0, X10, X2, X6)
	FOLDX(X0, X11, X3, X7)
	FOLDX(X0, X12, X4, X8)
	ADDQ  $64, SI
	ADDQ  $64, DI
	SUBQ  $64, CX
	JMP   loop64

fold4:
	MOVOU K128(BX), X0
	FOLDX(X0, X2, X1, X5)
	FOLDX(X0, X3, X1, X5)
	FOLDX(X0, X4, X1, X5)

loop16:
	CMPQ  CX, $16
	JB    final
	MOVOU 0(SI), X9
	MOVOU X9, 0(DI)
	FOLDX(X0, X9, X1, X5)
	ADDQ  $16, SI
	ADDQ  $16, DI
	SUBQ  $16, CX
	JMP   loop16

final:
	SSEFINAL(X1)
	COPYTAIL
	NOTL AX
	MOVL AX, ret+56(FP)
	RET

// func cpuid(leaf, sub uint32) (eax, ebx, ecx, edx uint32)
TEXT ·cpuid(SB), NOSPLIT, $0-24
	MOVL leaf+0(FP), AX
	MOVL sub+4(FP), CX
	CPUID
	MOVL AX, eax+8(FP)
	MOVL BX, ebx+12(FP)
	MOVL CX, ecx+16(FP)
	MOVL DX, edx+20(FP)
	RET
