package crc32c

// Arithmetic on polynomials over GF(2) modulo the Castagnoli polynomial P.
// Here a uint32 holds a polynomial of degree < 32 in natural order: bit i is
// the coefficient of x^i. A CRC register holds the same polynomial reflected
// (bit i is the coefficient of x^(31-i)); bits.Reverse32 converts.

// poly is P = x^32 + ... + 1 in natural order without its x^32 term;
// bits.Reverse32(poly) == 0x82F63B78, the reflected form hash/crc32 uses.
const poly = 0x1EDC6F41

// mulMod returns a*b mod P: Horner's rule over b's nibbles, high first,
// r = r*x^4 + a*nibble, with a's 16 multiples and the reduction of r's
// top nibble from tables.
func mulMod(a, b uint32) uint32 {
	var am [16]uint32 // am[k] = a*k mod P
	am[1] = a
	for k := 2; k < 16; k += 2 {
		am[k] = timesX(am[k/2])
		am[k+1] = am[k] ^ a
	}
	var r uint32
	for shift := 28; shift >= 0; shift -= 4 {
		r = r<<4 ^ top4[r>>28] ^ am[b>>shift&15]
	}
	return r
}

// timesX returns a*x mod P.
func timesX(a uint32) uint32 {
	if a&(1<<31) != 0 {
		return a<<1 ^ poly
	}
	return a << 1
}

// top4[t] is t*x^32 mod P for a nibble t: what r<<4 drops.
var top4 = func() (t [16]uint32) {
	for k := range t {
		t[k] = reduce64(uint64(k) << 32)
	}
	return t
}()

// reduce64 returns p mod P for p of degree < 64, one bit at a time.
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
