// Package crc32c computes CRC32C (Castagnoli), bit for bit what hash/crc32
// computes with crc32.MakeTable(crc32.Castagnoli), faster on long inputs:
// on amd64 it folds the message with carry-less multiplication instead of
// the CRC32 instruction's dependency chain. It also combines CRCs of parts
// (Combine) and copies while checksumming, in one pass where a kernel can
// (Copy).
//
// # Kernels
//
// On amd64, chosen at run time:
//
//	avx512  AVX-512F/VL + VPCLMULQDQ: 4 ZMM accumulators (256 bytes a
//	        step, 16 lanes of 128 bits) from 256 bytes, one from 64;
//	        from 16128 bytes on, on AMD Zen 5, hybrid blocks that also
//	        keep the CRC32 instruction busy (below)
//	sse     SSE4.2 + PCLMULQDQ: 4 XMM accumulators (64 bytes a step),
//	        for inputs of 64-255 bytes, and with hybrid blocks from
//	        9792 bytes on; between, hash/crc32 is faster
//
// Shorter inputs, other CPUs and architectures, and builds with the purego
// tag use hash/crc32 (itself the CRC32 instruction on amd64 and arm64).
// Copy runs in one pass with the avx512 kernel and, under 256 bytes, the
// sse one; otherwise it copies and then runs Update.
//
// # Folding
//
// Write polynomials over GF(2); P = 0x1EDC6F41 with x^32 (reflected
// 0x82F63B78). For a message M of n bytes, read as a polynomial with the
// first bit of the first byte as its highest coefficient, the register
// after it is R = (S*x^(8n) + M*x^32) mod P from register S; Update
// inverts S on the way in and R on the way out. S*x^(8n) is S added to the
// first 32 bits of M, so the kernels xor the register into the first four
// bytes and continue from zero.
//
// Only M mod P matters, so any 128-bit block A followed by d more bits of
// message may be replaced by any B == A*x^d (mod P) added into the block d
// bits later. Split A = H*x^64 + L (H, L of degree < 64):
//
//	A*x^d = H*x^(d+64) + L*x^d == H*(x^(d+64) mod P) + L*(x^d mod P)
//
// two 64x32-bit carry-less products of degree < 96, which fit the 128
// bits. A kernel keeps k such accumulators over consecutive 16-byte lanes
// and folds each by d = 128k bits into the next k lanes of input; at the
// end the lanes are folded into the last one (lane i by 128(k-1-i) bits),
// the rest of the input 16 bytes at a time (d = 128), and the last 128
// bits A are a 16-byte message whose register from zero, two CRC32Q
// instructions, is the register of everything; the last < 16 bytes go
// through CRC32 instructions too.
//
// # Constants
//
// Sixteen bytes loaded little-endian hold the first message bit in bit 0,
// so the register is bit-reflected: bit j of the low qword is the
// coefficient of x^(127-j), of H's x^(63-j). PCLMULQDQ multiplies reflected
// operands and returns the product reflected in 127 bits, one short of 128:
// read as a 128-bit reflected value it is the product times x. So the
// constant for H is x^(d+63) mod P and for L x^(d-1) mod P, each a
// polynomial of degree < 32 stored reflected in 64 bits
// (bits.Reverse64 of its natural form: its low 32 bits are zero). foldK
// holds them for d = 2048, 512, 128, for the lane folds 384, 256, 128
// and for the hybrid blocks. TestFoldConstants derives each by long
// division; TestModel and TestModelHybrid run the same folding in Go,
// with a software carry-less multiply, against hash/crc32 on every
// architecture.
//
// # Hybrid blocks
//
// VPCLMULQDQ and the CRC32 instruction run in different units, and on the
// development machine (AMD Zen 5) the folding alone is bound by VPCLMULQDQ
// throughput (about 60 GB/s), near what six to eight interleaved CRC32
// chains give and 2x the three of hash/crc32. So the AVX-512 kernel takes
// blocks of blockBytes (15872): 8 KiB folded as above, in 32 steps of 256
// bytes, while each step also sums 40 bytes of each of six streams of
// 1280 bytes that follow the 8 KiB, with the CRC32 instruction from a zero
// register, while a prefetch pointer runs 12 KiB ahead of the block at
// its pace, so that all seven find their lines in L1 (the sse kernel does
// the same with 64-byte steps, blocks of 9728 bytes, and prefetches a
// fixed distance ahead in each of the seven). In the sse kernel, at the
// block's end the accumulators fold forward over the streams (d = 8*6*1280
// bits) and each stream's register c, which is S*x^32 mod P for its bytes
// S, is added to the last lane as c*x^(e-65) mod P, e its distance in bits
// to the block's end: one carry-less product, where the -65 undoes the
// x^32 of the register, the x^32 of c's place in the low half of a 64-bit
// operand and the x of the product.
//
// The avx512 kernel ends a block with less of the work that bounds it,
// VPCLMULQDQ (2 instructions instead of 14): the six registers, two in
// each of three lanes of a ZMM, join the last accumulator's lanes where
// they stand, before the streams: a lane that ends f bits before the block's
// end takes c*x^(e-f-65) (f > e: x is invertible mod P). The fold over the
// streams is then left to the next block's first step, which folds by
// 2048 + 8*6*1280 bits instead of 2048, and after the last block to a fold
// of its own.
//
// The balance of the blocks, 240 bytes of CRC32 instructions to 256 of
// folding, suits a CPU that issues CRC32 twice a cycle; the avx512 kernel
// runs them only on AMD family 0x1a (Zen 5), where they were measured,
// and folds only elsewhere. The sse kernel runs them everywhere: its
// folding alone is no faster than hash/crc32.
//
// # Combining
//
// Combine uses CRC(a||b) = CRC(a)*x^(8 len(b)) + CRC(b) mod P (the
// inversions cancel), x^(8n) from a table of x^(2^k): one multiplication
// per set bit of len(b), no bytes.
package crc32c
