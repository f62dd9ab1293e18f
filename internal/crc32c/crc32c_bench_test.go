package crc32c

import (
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// The paired benchmarks run ours and the baselines one after the other
// inside each iteration, on the same buffer, and report each one's GB/s
// and the ratios, so that load from other work on the machine falls on
// all of them alike. Run with -cpu 1.

// pairedSizes are the buffers: 2 MiB chunks (in cache once warm: every
// iteration reads the same bytes) and 256 MiB (streaming from memory).
var pairedSizes = []int{2 << 20, 256 << 20}

func sizeName(n int) string {
	if n >= 1<<20 {
		return fmt.Sprintf("%dMiB", n>>20)
	}
	if n >= 1<<10 {
		return fmt.Sprintf("%dKiB", n>>10)
	}
	return fmt.Sprintf("%dB", n)
}

// timed adds how long f takes to *d.
func timed(d *[]time.Duration, f func()) {
	t := time.Now()
	f()
	*d = append(*d, time.Since(t))
}

// reportPaired reports, for runs d[i] (one duration per iteration) of n
// bytes each: every run's GB/s over all iterations ("<name>-GB/s"), the
// first run's speed over each other's as the median of the per-iteration
// ratios ("x-<name>"), which load on the machine that hits one iteration
// cannot move far, and the same ratio of the fastest iterations
// ("xbest-<name>"), what each can do when nothing else runs. SetBytes
// counts the n bytes once per iteration, so the MB/s column is of all
// runs together.
func reportPaired(b *testing.B, n int, names []string, d [][]time.Duration) {
	for i := range d {
		var sum time.Duration
		for _, x := range d[i] {
			sum += x
		}
		b.ReportMetric(float64(n)*float64(len(d[i]))/sum.Seconds()/1e9, names[i]+"-GB/s")
	}
	for i := 1; i < len(d); i++ {
		r := make([]float64, len(d[0]))
		for j := range r {
			r[j] = d[i][j].Seconds() / d[0][j].Seconds()
		}
		slices.Sort(r)
		b.ReportMetric(r[len(r)/2], "x-"+names[i])
		b.ReportMetric(slices.Min(d[i]).Seconds()/slices.Min(d[0]).Seconds(), "xbest-"+names[i])
	}
}

// BenchmarkChecksumPaired: ours, hash/crc32 Castagnoli and memcpy of the
// same buffer in each iteration; x-std is the speedup over hash/crc32,
// x-memcpy ours over a plain copy.
func BenchmarkChecksumPaired(b *testing.B) {
	for _, n := range pairedSizes {
		b.Run(sizeName(n), func(b *testing.B) {
			src := randBytes(rand.New(rand.NewPCG(1, uint64(n))), n)
			dst := make([]byte, n)
			copy(dst, src)
			b.ReportAllocs()
			b.SetBytes(int64(n))
			d := [][]time.Duration{make([]time.Duration, 0, b.N), make([]time.Duration, 0, b.N), make([]time.Duration, 0, b.N)}
			var sum uint32
			b.ResetTimer()
			for range b.N {
				timed(&d[0], func() { sum ^= Checksum(src) })
				timed(&d[1], func() { sum ^= crc32.Checksum(src, table) })
				timed(&d[2], func() { copy(dst, src) })
			}
			if sum != 0 {
				b.Fatal("ours and hash/crc32 differ")
			}
			reportPaired(b, n, []string{"ours", "std", "memcpy"}, d)
		})
	}
}

// BenchmarkCopyPaired: Copy (one pass), copy then Update (two passes),
// and copy alone, on the same buffers in each iteration.
func BenchmarkCopyPaired(b *testing.B) {
	for _, n := range pairedSizes {
		b.Run(sizeName(n), func(b *testing.B) {
			src := randBytes(rand.New(rand.NewPCG(2, uint64(n))), n)
			dst := make([]byte, n)
			copy(dst, src) // fault the pages in
			b.ReportAllocs()
			b.SetBytes(int64(n))
			d := [][]time.Duration{make([]time.Duration, 0, b.N), make([]time.Duration, 0, b.N), make([]time.Duration, 0, b.N)}
			var sum uint32
			b.ResetTimer()
			for range b.N {
				timed(&d[0], func() { sum ^= Copy(dst, src, 0) })
				timed(&d[1], func() { copy(dst, src); sum ^= Update(0, dst) })
				timed(&d[2], func() { copy(dst, src) })
			}
			if sum != 0 {
				b.Fatal("Copy and copy+Update differ")
			}
			reportPaired(b, n, []string{"Copy", "copy+Update", "memcpy"}, d)
		})
	}
}

// BenchmarkSizes: Update and hash/crc32 on short inputs, where the
// kernels' setup and final reduction weigh most.
func BenchmarkSizes(b *testing.B) {
	for _, n := range []int{64, 128, 256, 512, 1 << 10, 4 << 10, 16 << 10, 64 << 10} {
		p := randBytes(rand.New(rand.NewPCG(3, uint64(n))), n)
		b.Run(sizeName(n)+"/ours", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(n))
			for range b.N {
				Update(0, p)
			}
		})
		b.Run(sizeName(n)+"/std", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(n))
			for range b.N {
				crc32.Update(0, table, p)
			}
		})
	}
}

// touchBlock is the block store's crcStream touches ahead of the CRC.
const touchBlock = 128 << 10

// touchedUpdate is store.crcStream's method with update as the CRC: load
// one byte of each cache line of the next block, then sum the current one.
func touchedUpdate(p []byte, update func(uint32, []byte) uint32) uint32 {
	var crc uint32
	var keep byte
	for off := 0; off < len(p); off += touchBlock {
		end := min(off+touchBlock, len(p))
		for i := end; i < min(end+touchBlock, len(p)); i += 64 {
			keep ^= p[i]
		}
		crc = update(crc, p[off:end])
	}
	touchSink ^= keep // the loads are the point: keep them
	return crc
}

// touchSink keeps touchedUpdate's loads.
var touchSink byte

// BenchmarkStreamPaired: on a buffer streamed from memory, Update alone
// against the touch-ahead of store's crcStream with Update and with
// hash/crc32 (what the store ran before this package).
func BenchmarkStreamPaired(b *testing.B) {
	n := 256 << 20
	src := randBytes(rand.New(rand.NewPCG(4, uint64(n))), n)
	std := func(crc uint32, p []byte) uint32 { return crc32.Update(crc, table, p) }
	b.ReportAllocs()
	b.SetBytes(int64(n))
	d := [][]time.Duration{make([]time.Duration, 0, b.N), make([]time.Duration, 0, b.N), make([]time.Duration, 0, b.N)}
	var sum uint32
	b.ResetTimer()
	for range b.N {
		timed(&d[0], func() { sum ^= Checksum(src) })
		timed(&d[1], func() { sum ^= touchedUpdate(src, Update) })
		timed(&d[2], func() { sum ^= touchedUpdate(src, std) })
	}
	if sum != Checksum(src) && b.N%2 == 1 || sum != 0 && b.N%2 == 0 {
		b.Fatal("the three CRCs differ")
	}
	reportPaired(b, n, []string{"ours", "ours+touch", "std+touch"}, d)
}

// BenchmarkKernels runs each kernel this CPU has, and hash/crc32, alone on
// one buffer: in L2 (256 KiB) and from L3 (2 MiB). Besides the mean it
// reports best-GB/s, the fastest iteration's speed: on a loaded machine
// the mean mostly measures the load.
func BenchmarkKernels(b *testing.B) {
	runs := []testKernel{{name: "std", ok: true, update: want}}
	runs = append(runs, kernels...)
	for _, n := range []int{256 << 10, 2 << 20} {
		p := randBytes(rand.New(rand.NewPCG(5, uint64(n))), n)
		for _, k := range runs {
			if !k.ok || n < k.min {
				continue
			}
			b.Run(sizeName(n)+"/"+k.name, func(b *testing.B) {
				b.ReportAllocs()
				b.SetBytes(int64(n))
				best := time.Duration(1<<63 - 1)
				var sum uint32
				for range b.N {
					t := time.Now()
					sum ^= k.update(0, p)
					best = min(best, time.Since(t))
				}
				sinkKernel = sum
				b.ReportMetric(float64(n)/best.Seconds()/1e9, "best-GB/s")
			})
		}
	}
}

var sinkKernel uint32
