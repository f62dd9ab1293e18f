package crc32c

import (
	"math/bits"
	"testing"
)

// xPowNaive returns x^n mod P by n multiplications by x: the long division
// written out, independent of mulMod and its table.
func xPowNaive(n int) uint32 {
	r := uint64(1)
	for range n {
		r <<= 1
		if r&(1<<32) != 0 {
			r ^= 1<<32 | poly
		}
	}
	return uint32(r)
}

// foldPair returns the constant lane for folding 128 bits forward by d
// bits, as foldK stores it.
func foldPair(d int) [2]uint64 {
	return [2]uint64{
		bits.Reverse64(uint64(xPowNaive(d + 63))),
		bits.Reverse64(uint64(xPowNaive(d - 1))),
	}
}

// TestFoldConstants derives every constant of foldK again; on a mismatch
// it prints the table to check in.
func TestFoldConstants(t *testing.T) {
	var got [len(foldK)]uint64
	for i, d := range foldDistances {
		if d == 0 {
			continue
		}
		p := foldPair(d)
		got[2*i], got[2*i+1] = p[0], p[1]
	}
	if got != foldK {
		for i := 0; i < len(got); i += 2 {
			t.Logf("0x%016x, 0x%016x, // d = %d", got[i], got[i+1], foldDistances[i/2])
		}
		t.Fatal("foldK differs from the derivation")
	}
}

// TestPolynomial checks the reflected form of P and mulMod/xPowMod
// against the naive powers of x.
func TestPolynomial(t *testing.T) {
	if r := bits.Reverse32(poly); r != 0x82F63B78 {
		t.Fatalf("reflected poly %#x, want 0x82F63B78", r)
	}
	for n := 0; n < 5000; n += 7 {
		if got, w := xPowMod(uint64(n), 0), xPowNaive(n); got != w {
			t.Fatalf("xPowMod(%d) = %#x, want %#x", n, got, w)
		}
		if n%8 == 0 {
			if got, w := xPowMod(uint64(n/8), 3), xPowNaive(n); got != w {
				t.Fatalf("xPowMod(%d bytes) = %#x, want %#x", n/8, got, w)
			}
		}
	}
	// x^a * x^b == x^(a+b) far beyond the naive range.
	for _, c := range [][2]uint64{{1 << 40, 12345}, {1<<63 - 1, 1}, {99, 1 << 62}} {
		got := mulMod(xPowMod(c[0], 0), xPowMod(c[1], 0))
		if w := xPowMod(c[0]+c[1], 0); got != w {
			t.Fatalf("x^%d * x^%d = %#x, want %#x", c[0], c[1], got, w)
		}
	}
}
