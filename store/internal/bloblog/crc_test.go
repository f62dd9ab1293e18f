package bloblog

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/internal/crc32c"
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

// BenchmarkCRCStream compares, on a buffer far larger than the last-level
// cache (so streaming from memory), CRC (block touch-ahead) with one plain
// crc32c.Update, alternating inside each iteration so that both meet the
// same machine load; x-plain is CRC's time over plain's (< 1: CRC faster).
func BenchmarkCRCStream(b *testing.B) {
	buf := make([]byte, 256<<20)
	fill(rand.New(rand.NewPCG(7, 8)), buf)
	var touch, plain time.Duration
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for b.Loop() {
		t0 := time.Now()
		c1 := CRC(buf)
		t1 := time.Now()
		c2 := crc32c.Checksum(buf)
		t2 := time.Now()
		if c1 != c2 {
			b.Fatalf("CRC %08x, crc32c %08x", c1, c2)
		}
		touch, plain = touch+t1.Sub(t0), plain+t2.Sub(t1)
	}
	gbps := func(d time.Duration) float64 { return float64(len(buf)) * float64(b.N) / d.Seconds() / 1e9 }
	b.ReportMetric(gbps(touch), "touch-GB/s")
	b.ReportMetric(gbps(plain), "plain-GB/s")
	b.ReportMetric(touch.Seconds()/plain.Seconds(), "x-plain")
}
