package crc32c

import (
	"math/bits"
	"math/rand/v2"
	"testing"
)

// xPowNaive returns x^n mod P, n >= 0 by n multiplications by x, n < 0 by
// -n multiplications by x^-1: the long division written out, independent of
// mulMod and its table.
func xPowNaive(n int) uint32 {
	r := uint64(1)
	for ; n > 0; n-- {
		r <<= 1
		if r&(1<<32) != 0 {
			r ^= 1<<32 | poly
		}
	}
	for ; n < 0; n++ { // r/x: P's constant term makes r+P even
		if r&1 != 0 {
			r ^= 1<<32 | poly
		}
		r >>= 1
	}
	return uint32(r)
}

// rev64 is a polynomial of degree < 32 as foldK stores it.
func rev64(p uint32) uint64 { return bits.Reverse64(uint64(p)) }

// foldPair returns the constant lane for folding 128 bits forward by d
// bits, as foldK stores it.
func foldPair(d int) [2]uint64 {
	return [2]uint64{rev64(xPowNaive(d + 63)), rev64(xPowNaive(d - 1))}
}

// TestFoldConstants derives every constant of foldK again; on a mismatch
// it prints the table to check in.
func TestFoldConstants(t *testing.T) {
	var w []uint64
	for _, d := range []int{2048, 512, 128, 384, 256, 128} {
		p := foldPair(d)
		w = append(w, p[0], p[1])
	}
	w = append(w, 0, 0)
	p := foldPair(8 * blockStreams * blockStream)
	w = append(w, p[0], p[1])
	for i := range blockStreams {
		e := 8 * (blockStreams - 1 - i) * blockStream
		w = append(w, rev64(xPowNaive(e-65)), 0)
	}
	p = foldPair(2048 + 8*blockStreams*blockStream)
	w = append(w, p[0], p[1])
	h := hybridShape{blockIters, blockStreams, blockStream, true}
	for i := range 8 { // Z3's 4 lanes, stream i in qword i
		w = append(w, 0)
		if i < blockStreams {
			w[len(w)-1] = rev64(xPowNaive(streamLaneExp(h, i, 16)))
		}
	}
	if len(w) != len(foldK) || [len(foldK)]uint64(w) != foldK {
		for i := 0; i < len(w); i += 2 {
			t.Logf("%3d: %#016x, %#016x,", 8*i, w[i], w[i+1])
		}
		t.Fatal("foldK differs from the derivation")
	}
}

// mulModSlow is a*b mod P bit by bit: the carry-less product, then the
// long division.
func mulModSlow(a, b uint32) uint32 {
	var p uint64
	for i := range 32 {
		if b>>i&1 != 0 {
			p ^= uint64(a) << i
		}
	}
	return reduce64(p)
}

// TestMulMod checks mulMod against mulModSlow on random and edge operands.
func TestMulMod(t *testing.T) {
	r := rand.New(rand.NewPCG(25, 26))
	edge := []uint32{0, 1, 2, 1 << 31, 0xffffffff, poly}
	for i := range 20000 {
		a, b := r.Uint32(), r.Uint32()
		if i < len(edge)*len(edge) {
			a, b = edge[i/len(edge)], edge[i%len(edge)]
		}
		if got, w := mulMod(a, b), mulModSlow(a, b); got != w {
			t.Fatalf("mulMod(%#x, %#x) = %#x, want %#x", a, b, got, w)
		}
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
		if got := mulMod(xPowNaive(-n), xPowNaive(n)); got != 1 {
			t.Fatalf("x^-%d * x^%d = %#x, want 1", n, n, got)
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
