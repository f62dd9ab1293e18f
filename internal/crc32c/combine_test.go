package crc32c

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestCombine checks Combine(CRC(a), CRC(b), len(b)) == CRC(a||b) on random
// splits, empty parts included.
func TestCombine(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	p := randBytes(r, 1<<20)
	whole := Checksum(p)
	splits := []int{0, 1, 7, 8, 9, 4096, len(p) - 1, len(p)}
	for range 40 {
		splits = append(splits, r.IntN(len(p)+1))
	}
	for _, s := range splits {
		a, b := p[:s], p[s:]
		if got := Combine(Checksum(a), Checksum(b), int64(len(b))); got != whole {
			t.Fatalf("Combine at %d of %d = %#08x, want %#08x", s, len(p), got, whole)
		}
	}
	if got := Combine(0x12345678, 0, -5); got != 0x12345678 {
		t.Fatalf("Combine with lenB -5 = %#08x, want crcA", got)
	}
}

// TestCombineLong checks Combine for lengths beyond any buffer: b of n
// zero bytes is CRC(b) from the zero-byte CRC doubled by Combine itself,
// and the results must agree with appending zeros one megabyte at a time.
func TestCombineLong(t *testing.T) {
	zeros := make([]byte, 1<<20)
	zcrc := Checksum(zeros)
	crcA := Checksum([]byte("prefix"))
	viaUpdate := crcA
	zn, n := zcrc, int64(len(zeros)) // zn = CRC of n zero bytes
	for i := 1; i <= 64; i++ {
		viaUpdate = Update(viaUpdate, zeros)
		if i&(i-1) == 0 { // i a power of two: n == i MiB
			if got := Combine(crcA, zn, n); got != viaUpdate {
				t.Fatalf("Combine over %d MiB of zeros = %#08x, want %#08x", i, got, viaUpdate)
			}
			zn, n = Combine(zn, zn, n), 2*n
		}
	}
	// Past any buffer only the algebra checks it: shifting by m bytes
	// twice is shifting by 2m.
	for _, m := range []int64{1<<40 + 3, 1 << 61, 1<<62 - 1} {
		if Combine(Combine(crcA, 0, m), 0, m) != Combine(crcA, 0, 2*m) {
			t.Fatalf("Combine is not additive in lenB at %d", m)
		}
	}
}

// BenchmarkCombine: a 2 MiB part (one set bit in lenB) and a length with
// many set bits.
func BenchmarkCombine(b *testing.B) {
	for _, n := range []int64{2 << 20, 1<<31 - 1} {
		b.Run(fmt.Sprintf("lenB=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			c := uint32(0x12345678)
			for range b.N {
				c = Combine(c, 0x9abcdef0, n)
			}
			sinkCombine = c
		})
	}
}

var sinkCombine uint32
