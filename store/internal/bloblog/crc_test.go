package bloblog

import (
	"math/rand/v2"
	"testing"

	"github.com/kvstore/kvstore/format"
)

func TestCRCCombine(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, n := range [][2]int{{0, 0}, {0, 5}, {5, 0}, {1, 1}, {7, 64}, {100, 1000}, {4096, 3}, {1, 70000}} {
		a, b := make([]byte, n[0]), make([]byte, n[1])
		fill(rng, a)
		fill(rng, b)
		want := format.CRC(append(append([]byte(nil), a...), b...))
		if got := CRCCombine(format.CRC(a), format.CRC(b), uint64(len(b))); got != want {
			t.Errorf("lengths %v: combined %08x, want %08x", n, got, want)
		}
	}
}

func BenchmarkCRCCombine(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		CRCCombine(0x12345678, 0x9abcdef0, 2<<20)
	}
}

func TestCRCStream(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, n := range []int{0, 1, crcBlock - 1, crcBlock, crcBlock + 1, 2 * crcBlock, 5*crcBlock + 17, 40 * crcBlock} {
		b := make([]byte, n)
		fill(rng, b)
		want := format.CRC(b)
		if got := CRC(b); got != want {
			t.Errorf("CRC, %d bytes: %08x, want %08x", n, got, want)
		}
	}
}
