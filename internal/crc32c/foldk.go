package crc32c

// Blocks of the AVX-512 kernel's hybrid loop: each is blockIters steps of
// 256 bytes folded in the vector unit while the CRC32 instruction sums
// blockStreams streams of blockStream bytes that follow them, in the
// integer unit (fold_amd64.s has the same numbers as defines).
const (
	blockIters   = 32
	blockStreams = 6
	blockStream  = 40 * blockIters
	blockBytes   = 256*blockIters + blockStreams*blockStream
	// sseBlockBytes is a block of the SSE kernel: steps of 64 bytes.
	sseBlockBytes = 64*blockIters + blockStreams*blockStream
)

// foldK holds the constants the amd64 kernels load, as 128-bit lanes (low
// qword first), each a polynomial of degree < 32 reversed into 64 bits
// (bit j the coefficient of x^(63-j)). The doc comment says why; the
// comments say which power of x mod P; TestFoldConstants derives every
// one again.
var foldK = [38]uint64{
	// 0: fold 4 ZMM accumulators over 256 bytes: x^(2048+63), x^(2048-1)
	0xe9a5d8be00000000, 0x1426a81500000000,
	// 16: fold 64 bytes (d = 512): one ZMM, or 4 XMM accumulators
	0x1c19243b00000000, 0x75bba45b00000000,
	// 32: fold 16 bytes (d = 128)
	0x3743f7bd00000000, 0x3171d43000000000,
	// 48: the four lanes of a ZMM into the last: lane 0 by d = 384,
	// lane 1 by 256, lane 2 by 128, lane 3 unfolded (zero)
	0xa46ef4aa00000000, 0x6051243f00000000,
	0x33ccbbbc00000000, 0xa2158b3400000000,
	0x3743f7bd00000000, 0x3171d43000000000,
	0, 0,
	// 112: a block's accumulators over its streams (after the avx512
	// kernel's last block): d = 8*blockStreams*blockStream
	0x8ee575b900000000, 0xb1d4f7ff00000000,
	// 128: the sse kernel's stream registers into the last lane, stream i
	// times x^(8*(blockStreams-1-i)*blockStream-65)
	0x15d6e07b00000000, 0,
	0x4b9fba3300000000, 0,
	0x543e4ab100000000, 0,
	0x5370837900000000, 0,
	0xbd77c2cf00000000, 0,
	0xc915ea3b00000000, 0,
	// 224: the avx512 kernel's first step of a block after another: the
	// fold over 256 bytes and the streams, d = 2048+8*blockStreams*blockStream
	0x1b9224fc00000000, 0xbdb5ac0300000000,
	// 240: the avx512 kernel's stream registers into the lanes of its last
	// accumulator before the streams, stream i in qword i (lane i/2),
	// times x^(8*(blockStreams-1-i)*blockStream - 8*blockStreams*blockStream
	// - 128*(3-i/2) - 65); lane 3 takes none
	0xf208084800000000, 0x671f199f00000000,
	0xd887248f00000000, 0x7b5947f800000000,
	0xdf8faed100000000, 0x488b53a400000000,
	0, 0,
}
