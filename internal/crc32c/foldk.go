package crc32c

// foldK holds the folding constants the amd64 kernels load, as 128-bit
// lanes (low qword first). The pair for a distance of d bits is
//
//	x^(d+63) mod P, x^(d-1) mod P
//
// each reversed into 64 bits (bit j the coefficient of x^(63-j)); the doc
// comment says why. TestFoldConstants derives every one again.
var foldK = [14]uint64{
	// 0: fold 4 ZMM accumulators over 256 bytes (d = 2048)
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
}

// foldDistances are the distances, in bits, of foldK's lanes in order
// (0 for the zero lane).
var foldDistances = [7]int{2048, 512, 128, 384, 256, 128, 0}
