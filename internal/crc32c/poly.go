package crc32c

import "math/bits"

// Arithmetic on polynomials over GF(2) modulo the Castagnoli polynomial P.
// Here a uint32 holds a polynomial of degree < 32 in natural order: bit i is
// the coefficient of x^i. A CRC register holds the same polynomial reflected
// (bit i is the coefficient of x^(31-i)); bits.Reverse32 converts.

// poly is P = x^32 + ... + 1 in natural order without its x^32 term;
// bits.Reverse32(poly) == 0x82F63B78, the reflected form hash/crc32 uses.
const poly = 0x1EDC6F41

// mulMod returns a*b mod P.
func mulMod(a, b uint32) uint32 {
	return reduce64(clmul32(a, b))
}

// clmul32 returns the carry-less product of a and b (degree < 63).
func clmul32(a, b uint32) uint64 {
	var p uint64
	for x := uint64(a); b != 0; b &= b - 1 {
		p ^= x << bits.TrailingZeros32(b)
	}
	return p
}

// reduce64 returns p mod P for p of degree < 64.
func reduce64(p uint64) uint32 {
	const full = 1<<32 | poly
	for i := 63; i >= 32; i-- {
		if p&(1<<i) != 0 {
			p ^= full << (i - 32)
		}
	}
	return uint32(p)
}

// xPow2k[k] is x^(2^k) mod P; xPowMod multiplies the ones it needs.
var xPow2k = func() (t [67]uint32) {
	t[0] = 2 // x
	for k := 1; k < len(t); k++ {
		t[k] = mulMod(t[k-1], t[k-1])
	}
	return t
}()

// xPowMod returns x^(n * 2^shift) mod P, shift <= 3 (shift 3 counts n in
// bytes: the degree 8n may exceed 64 bits).
func xPowMod(n uint64, shift int) uint32 {
	r := uint32(1)
	for k := shift; n != 0; n, k = n>>1, k+1 {
		if n&1 != 0 {
			r = mulMod(r, xPow2k[k])
		}
	}
	return r
}
