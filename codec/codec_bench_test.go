package codec

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/internal/cputest"
)

// One Llama-3.1-8B layer chunk of a 1,000-token document: 8 KV heads x
// 1000 tokens x 128, bf16 (2,048,000 bytes).
var benchShape = [3]int{8, 1000, 128}

// memcpyGBs measures copying src into dst, the benchmark's own buffers:
// the yardstick every codec is held against. It is the median of five
// timings of 10 copies, taken outside the benchmark's timer just before it,
// so that a busy machine slows both alike as far as it can.
func memcpyGBs(b *testing.B, dst, src [][]byte) float64 {
	b.StopTimer()
	defer b.StartTimer()
	n := 0
	for i := range src {
		n += copy(dst[i], src[i])
	}
	var gbs [5]float64
	for i := range gbs {
		const runs = 10
		start := time.Now()
		for range runs {
			for j := range src {
				copy(dst[j], src[j])
			}
		}
		gbs[i] = float64(runs*n) / time.Since(start).Seconds() / 1e9
	}
	slices.Sort(gbs[:])
	return gbs[2]
}

// report adds decoded GB/s, the same against memcpy, the compression ratio
// and stored bytes per token of the chunk, and GB per CPU-second (cpu0 is
// cputest.Used() when the timed loop began): on a shared machine that one says
// what the code costs, wall-clock GB/s what it got.
func report(b *testing.B, d Desc, stored int, memcpy float64, cpu0 time.Duration) {
	bytes := float64(b.N) * float64(d.RawSize())
	gbs := bytes / b.Elapsed().Seconds() / 1e9
	b.ReportMetric(gbs, "GB/s")
	b.ReportMetric(gbs/memcpy, "x_memcpy")
	b.ReportMetric(float64(d.RawSize())/float64(stored), "ratio")
	b.ReportMetric(float64(stored)/float64(d.Tokens), "B/token")
	if cpu := cputest.Used() - cpu0; cpu0 > 0 && cpu > 0 {
		b.ReportMetric(bytes/cpu.Seconds()/1e9, "GB/cpu-s")
	}
}

func BenchmarkMemcpy(b *testing.B) {
	d := desc(format.ChunkK, format.DTypeBF16, benchShape)
	src, dst := kvData(d, 1), make([]byte, d.RawSize())
	b.SetBytes(int64(len(src)))
	b.ReportAllocs()
	for b.Loop() {
		copy(dst, src)
	}
	b.ReportMetric(float64(b.N)*float64(len(src))/b.Elapsed().Seconds()/1e9, "GB/s")
}

func BenchmarkEncode(b *testing.B) {
	forEachBench(b, func(b *testing.B, c format.Codec, d Desc, src []byte) {
		memcpy := memcpyGBs(b, [][]byte{make([]byte, len(src))}, [][]byte{src})
		dst := mustEncode(b, src, c, d, benchOptions(c))
		b.SetBytes(int64(len(src)))
		b.ReportAllocs()
		cpu0 := cputest.Used()
		for b.Loop() {
			dst, _ = Encode(dst[:0], src, c, d, benchOptions(c))
		}
		report(b, d, len(dst), memcpy, cpu0)
	})
}

func BenchmarkDecode(b *testing.B) {
	forEachBench(b, func(b *testing.B, c format.Codec, d Desc, src []byte) {
		enc := mustEncode(b, src, c, d, benchOptions(c))
		dst := make([]byte, d.RawSize())
		memcpy := memcpyGBs(b, [][]byte{dst}, [][]byte{src})
		b.SetBytes(int64(len(src)))
		b.ReportAllocs()
		cpu0 := cputest.Used()
		for b.Loop() {
			if err := Decode(dst, enc, c, d); err != nil {
				b.Fatal(err)
			}
		}
		report(b, d, len(enc), memcpy, cpu0)
	})
}

// BenchmarkDecodeParallel decodes the 64 chunks of a 1,000-token
// Llama-3.1-8B packet (125 MiB) with DecodeParallel on GOMAXPROCS workers,
// against one core copying the raw chunks into the same destinations.
func BenchmarkDecodeParallel(b *testing.B) {
	for _, c := range benchCodecs {
		b.Run(c.String(), func(b *testing.B) {
			var jobs []Job
			var raws, dsts [][]byte
			stored := 0
			for i := range 64 {
				k := format.ChunkKind(1 + i%2)
				d := desc(k, format.DTypeBF16, benchShape)
				if i < 2 { // two distinct chunks, shared: the data's realism is in them
					raws = append(raws, kvData(d, 1))
					jobs = append(jobs, Job{Codec: c, Desc: d, Src: mustEncode(b, raws[i], c, d, benchOptions(c))})
				} else {
					raws = append(raws, raws[i%2])
					jobs = append(jobs, Job{Codec: c, Desc: d, Src: jobs[i%2].Src})
				}
				jobs[i].Dst = make([]byte, d.RawSize())
				dsts = append(dsts, jobs[i].Dst)
				stored += len(jobs[i].Src)
			}
			raw := 64 * jobs[0].Desc.RawSize()
			memcpy := memcpyGBs(b, dsts, raws) // on one core
			b.SetBytes(int64(raw))
			b.ReportAllocs()
			cpu0 := cputest.Used()
			for b.Loop() {
				if err := DecodeParallel(jobs, 0); err != nil {
					b.Fatal(err)
				}
			}
			gbs := float64(b.N) * float64(raw) / b.Elapsed().Seconds() / 1e9
			b.ReportMetric(gbs, "GB/s")
			b.ReportMetric(gbs/memcpy, "x_memcpy")
			b.ReportMetric(float64(stored)/1000, "B/token")
			if cpu := cputest.Used() - cpu0; cpu0 > 0 && cpu > 0 {
				b.ReportMetric(float64(b.N)*float64(raw)/cpu.Seconds()/1e9, "GB/cpu-s")
			}
		})
	}
}

// benchCodecs are the codecs benchmarked: every one.
var benchCodecs = append(allCodecs[:len(allCodecs):len(allCodecs)], format.CodecLowRank)

// benchRoPE is Llama 3.1's RoPE, which low-rank K chunks are encoded with.
var benchRoPE = format.RoPE{Style: format.RoPERotateHalf, Theta: 500000, Scaling: format.RoPEScalingLlama3,
	Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OriginalMaxPos: 8192}

// benchOptions are the defaults, and for low rank a fixed rank of 32 (a
// quarter of the head) with benchRoPE.
func benchOptions(c format.Codec) Options {
	if c == format.CodecLowRank {
		return Options{Rank: 32, RoPE: &benchRoPE}
	}
	return Options{}
}

// forEachBench runs fn for every codec on the K and the V chunk of
// benchShape in bf16.
func forEachBench(b *testing.B, fn func(b *testing.B, c format.Codec, d Desc, src []byte)) {
	for _, c := range benchCodecs {
		for _, k := range allKinds {
			d := desc(k, format.DTypeBF16, benchShape)
			src := kvData(d, 1)
			b.Run(fmt.Sprintf("%v/%v", c, k), func(b *testing.B) { fn(b, c, d, src) })
		}
	}
}

// BenchmarkEntropyCeiling reports, for the benchmark data, the order-0
// entropy bound of the byte-shuffled planes (the ratio a coder of each byte
// alone could reach at best: ceiling) next to the ratio shuffle-zstd
// reaches (zstd_ratio). The timed loop is the shuffle and the entropy sums.
func BenchmarkEntropyCeiling(b *testing.B) {
	for _, k := range allKinds {
		b.Run(k.String(), func(b *testing.B) {
			d := desc(k, format.DTypeBF16, benchShape)
			src := kvData(d, 1)
			enc := mustEncode(b, src, format.CodecShuffleZstd, d, Options{})
			planes := make([]byte, len(src))
			n := d.Elems()
			var bitsTotal float64
			for b.Loop() {
				shuffle(planes, src, 2)
				bitsTotal = planeEntropy(planes[:n]) + planeEntropy(planes[n:])
			}
			b.ReportMetric(float64(8*len(src))/bitsTotal, "ceiling")
			b.ReportMetric(float64(len(src))/float64(len(enc)), "zstd_ratio")
		})
	}
}

// planeEntropy is the order-0 entropy of p in bits, in all.
func planeEntropy(p []byte) float64 {
	var hist [256]int
	for _, x := range p {
		hist[x]++
	}
	var bits float64
	for _, c := range hist {
		if c > 0 {
			q := float64(c) / float64(len(p))
			bits -= float64(c) * math.Log2(q)
		}
	}
	return bits
}

// TestPlaneEntropy checks planeEntropy on planes whose entropy has a closed
// form: a constant plane (0 bits), every byte value once (8 bits a byte),
// and k copies of 0 0 0 1 (2 - (3/4)log2(3) bits a byte).
func TestPlaneEntropy(t *testing.T) {
	every := make([]byte, 256)
	for i := range every {
		every[i] = byte(i)
	}
	const k = 1000
	skewed := bytes.Repeat([]byte{0, 0, 0, 1}, k)
	for _, tc := range []struct {
		name  string
		plane []byte
		bits  float64
	}{
		{"constant", bytes.Repeat([]byte{7}, 100), 0},
		{"every byte once", every, 8 * 256},
		{"skewed", skewed, 4 * k * (2 - 0.75*math.Log2(3))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := planeEntropy(tc.plane); math.Abs(got-tc.bits) > 1e-9*max(1, tc.bits) {
				t.Errorf("planeEntropy = %v bits, want %v", got, tc.bits)
			}
		})
	}
}
