package store

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/reconstruct"
	"github.com/kvstore/kvstore/segment"
)

// spanBenchSpec is one layer of Llama-3.1-8B's KV: 8 KV heads of 128 dims,
// llama3 RoPE, bf16.
var spanBenchSpec = format.ModelSpec{Architecture: "llama", Layers: 1, KVHeads: 8, HeadDim: 128, DType: format.DTypeBF16,
	RoPE: format.RoPE{Style: format.RoPERotateHalf, Theta: 500000, Scaling: format.RoPEScalingLlama3,
		Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OriginalMaxPos: 8192}, WeightsID: "bench"}

// spanBenchInput is 2048 tokens of key-like rows (a decaying spectrum plus
// noise) with constant surprisal, so that spans come from MaxSpan alone:
// four 512-token spans per head.
func spanBenchInput(tokens int) *SpanInput {
	spec := spanBenchSpec
	rng := rand.New(rand.NewPCG(1, 2))
	hd, heads := spec.HeadDim, spec.KVHeads
	basis := make([]float32, 64*hd)
	for i := range basis {
		basis[i] = float32(rng.NormFloat64())
	}
	layer := func() []float32 {
		x := make([]float32, heads*tokens*hd)
		for r := range heads * tokens {
			for c := range 64 {
				w := float32(rng.NormFloat64() * 4 / float64(c+1))
				for j := range hd {
					x[r*hd+j] += w * basis[c*hd+j]
				}
			}
			for j := range hd {
				x[r*hd+j] += float32(0.03 * rng.NormFloat64())
			}
		}
		return x
	}
	in := &SpanInput{Model: &spec, K: [][]float32{layer()}, V: [][]float32{layer()}, Surprisal: make([]float32, tokens)}
	for i := range in.Surprisal {
		in.Surprisal[i] = 2
	}
	return in
}

// BenchmarkSpanReconstruct measures SeKV's zoom-in on the CPU from a
// stored memory: for every (KV head, span) of one Llama-3.1-8B layer (8
// heads x four 512-token spans, rank-32 bf16 factors), read the K and V
// factor blocks through the SpanReader (mmapped, CRC verified once), decode
// them and reconstruct bf16 keys with RoPE at their positions and values.
// MB/s counts the KV bytes produced; the memcpy sub-benchmark copies as
// many bytes; read-decode stops before reconstruction (MB/s still counts
// the KV bytes the factors stand for), to show the store's share.
func BenchmarkSpanReconstruct(b *testing.B) {
	db, _, _ := openSpanDB(b, true)
	defer db.Close()
	in := spanBenchInput(2048)
	m, err := db.BuildSpanMemory(in, &SpanOptions{
		Segment: segment.Options{Sinks: -1}, SVD: reconstruct.SVDOptions{Energy: 1}, FactorDType: format.DTypeBF16})
	if err != nil {
		b.Fatal(err)
	}
	r := putOpenSpan(b, db, m, "bench")
	defer r.Release()
	spans, hd := r.Meta().Spans, spanBenchSpec.HeadDim
	out := make([]byte, 512*hd*2)
	total := int64(2 * spanBenchSpec.KVHeads * 2048 * hd * 2)
	b.Run("read-decode-reconstruct", func(b *testing.B) {
		b.SetBytes(total)
		b.ReportAllocs()
		for b.Loop() {
			for h := range spanBenchSpec.KVHeads {
				for s, sp := range spans {
					pos := make([]int64, sp.Len())
					for i := range pos {
						pos[i] = int64(100000 + sp.Start + i)
					}
					for _, kind := range []format.ChunkKind{format.ChunkK, format.ChunkV} {
						f, err := r.Factors(0, h, s, kind)
						if err != nil {
							b.Fatal(err)
						}
						rope, p := r.RoPE(), pos
						if kind == format.ChunkV {
							rope, p = nil, nil
						}
						if err := reconstruct.ReconstructBytes(out[:sp.Len()*hd*2], format.DTypeBF16, f, nil, rope, p); err != nil {
							b.Fatal(err)
						}
					}
				}
			}
		}
	})
	b.Run("read-decode", func(b *testing.B) {
		b.SetBytes(total)
		b.ReportAllocs()
		for b.Loop() {
			for h := range spanBenchSpec.KVHeads {
				for s := range spans {
					for _, kind := range []format.ChunkKind{format.ChunkK, format.ChunkV} {
						if _, err := r.Factors(0, h, s, kind); err != nil {
							b.Fatal(err)
						}
					}
				}
			}
		}
	})
	b.Run("memcpy", func(b *testing.B) {
		src, dst := make([]byte, total), make([]byte, total)
		b.SetBytes(total)
		for b.Loop() {
			copy(dst, src)
		}
	})
	var energy float64
	for _, f := range m.Heads[0].K {
		for _, s := range f.S {
			energy += float64(s) * float64(s)
		}
	}
	if math.IsNaN(energy) || m.Heads[0].K[0].Rank != 32 {
		b.Fatalf("benchmark memory is not rank 32: %d", m.Heads[0].K[0].Rank)
	}
}
