package crc32c

import "math/bits"

// Combine returns the CRC32C of a||b from crcA = Checksum(a),
// crcB = Checksum(b) and lenB = len(b), without the bytes. A negative lenB
// counts as 0.
//
// Appending n bytes to a message multiplies its CRC register by x^(8n)
// modulo P and adds the register the n bytes make from zero; the pre- and
// post-inversion of Update cancel between the two parts, so
// CRC(a||b) = CRC(a)*x^(8n) + CRC(b) mod P. x^(8n) takes O(log n)
// multiplications from a table of x^(2^k).
func Combine(crcA, crcB uint32, lenB int64) uint32 {
	if lenB <= 0 {
		return crcA ^ crcB
	}
	a := bits.Reverse32(crcA)
	return bits.Reverse32(mulMod(a, xPowMod(uint64(lenB), 3))) ^ crcB
}
