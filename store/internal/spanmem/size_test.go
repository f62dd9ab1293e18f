package spanmem

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/lab/llama"
	"github.com/kvstore/kvstore/reconstruct"
)

// sizeSpec is the spec of a model with the given head dim (two layers of
// two KV heads), for inputs made up without a forward pass.
func sizeSpec(t *testing.T, hd int, dt format.DType) *format.ModelSpec {
	t.Helper()
	m, err := llama.Random(llama.Config{Dim: 4 * hd, Hidden: 32, Layers: 2, Heads: 4, KVHeads: 2, Vocab: 16, SeqLen: 8192,
		NormEps: 1e-5, RoPE: format.RoPE{Style: format.RoPERotateHalf, Theta: 10000}}, 1)
	if err != nil {
		t.Fatal(err)
	}
	return m.Spec(dt, fmt.Sprintf("size-hd%d", hd))
}

// sizeInput makes up a context's K and V per (layer, KV head): kind
// "lowrank" is rank-8 rows with a key-like decaying spectrum and 1% noise
// (real-shaped: pre-RoPE keys and values of trained models decay so),
// "runs" the same with runs of one repeated row (indentation at layer 0),
// "gauss" isotropic noise, which no factor compresses; all times scale.
// Surprisal is exponential, so that spans and anchors vary.
func sizeInput(t *testing.T, rng *rand.Rand, spec *format.ModelSpec, tokens int, kind string, scale float64) *Input {
	t.Helper()
	hd := spec.HeadDim
	in := &Input{Model: spec, Surprisal: make([]float32, tokens)}
	for i := range in.Surprisal {
		in.Surprisal[i] = float32(rng.ExpFloat64())
	}
	in.Surprisal[0] = float32(math.NaN())
	fill := func() []float32 {
		x := make([]float32, spec.KVHeads*tokens*hd)
		for h := range spec.KVHeads {
			const r = 8
			basis := make([]float64, r*hd)
			for i := range basis {
				basis[i] = rng.NormFloat64() / math.Sqrt(float64(hd))
			}
			for tk := range tokens {
				row := x[(h*tokens+tk)*hd : (h*tokens+tk+1)*hd]
				if kind == "runs" && tk > 0 && rng.IntN(3) > 0 {
					copy(row, x[(h*tokens+tk-1)*hd:(h*tokens+tk)*hd])
					continue
				}
				var coef [r]float64
				for i := range coef {
					coef[i] = 2 / float64(i+1) * rng.NormFloat64()
				}
				for j := range row {
					v := rng.NormFloat64()
					if kind != "gauss" {
						v *= 0.01
						for i, c := range coef {
							v += c * basis[i*hd+j] * math.Sqrt(float64(hd))
						}
					}
					row[j] = float32(v * scale)
				}
			}
		}
		return x
	}
	for range spec.Layers {
		in.K, in.V = append(in.K, fill()), append(in.V, fill())
	}
	return in
}

// spanCost is what settle charges a factored span: its factor blocks and
// its anchors' resident rows with their index entries.
func spanCost(m *Memory, s int) int64 {
	spec, sp := &m.Model, m.Segmentation.Spans[s]
	var cost int64
	for _, a := range m.Segmentation.Anchors {
		if a >= sp.Start && a < sp.End {
			cost += int64(2*spec.Layers*spec.KVHeads*spec.HeadDim*spec.DType.Size()) + 4
		}
	}
	for _, h := range m.Heads {
		for _, f := range []*reconstruct.Factors{h.K[s], h.V[s]} {
			cost += FactorBytes(f.Rows, f.Cols, f.Rank, m.FactorDType)
		}
	}
	return cost
}

// TestSpanMemorySize: over made-up inputs of head dims 16 to 128 (low
// rank with a decaying spectrum, runs of repeated rows, isotropic noise,
// scales from 2^-20 to 2^20, f16 and bf16 factors) and the forward pass
// of a random Llama, every factored span takes less room than its rows
// in bf16, and a memory takes at most its raw bf16 rows plus what every
// memory carries (summaries, records, extent padding and trailer) less
// what its factored spans save. All its bytes are counted (Size: resident
// rows, factors, padding, trailer, root and head records with the
// summaries). Where the rows compress (low rank, runs: what real keys and
// values look like, at head dims of 64 and more) that is at most the raw
// bf16 rows; where f16 cannot hold the singular values (scale 2^20) no
// span is factored in f16 (at 2^10 the longer spans' are past it).
func TestSpanMemorySize(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 17))
	type tc struct {
		name         string
		in           *Input
		opts         Options
		compressible bool // rank 8 of 64 dims and more: every span gains
		overflow     bool // singular values past f16's range (65504), factors in f16
	}
	var cases []tc
	for _, hd := range []int{16, 64, 128} {
		for _, kind := range []string{"lowrank", "runs", "gauss"} {
			for _, sc := range []float64{0x1p-20, 1, 0x1p10, 0x1p20} {
				for _, fdt := range []format.DType{0, format.DTypeBF16} {
					dt, tokens := format.DTypeBF16, 300
					if rng.IntN(2) == 0 {
						dt = format.DTypeF16
					}
					if sc == 1 && fdt == 0 {
						tokens = 1200
					}
					cases = append(cases, tc{fmt.Sprintf("hd%d %v %s x%g %d tokens factors %v", hd, dt, kind, sc, tokens, fdt),
						sizeInput(t, rng, sizeSpec(t, hd, dt), tokens, kind, sc), Options{FactorDType: fdt},
						kind != "gauss" && hd >= 64 && (fdt != 0 || sc < 0x1p10), fdt == 0 && sc >= 0x1p20})
				}
			}
		}
	}
	for _, tokens := range []int{64, 200, 500} {
		cases = append(cases, tc{fmt.Sprintf("random llama %d tokens", tokens), testInput(t, tokens, 0), testOptions, false, false},
			tc{fmt.Sprintf("random llama %d tokens, defaults", tokens), testInput(t, tokens, 0), Options{}, false, false})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, err := Build(c.in, &c.opts, &artifacts{})
			if err != nil {
				t.Fatal(err)
			}
			size, err := m.Size()
			if err != nil {
				t.Fatal(err)
			}
			spec := &m.Model
			token := int64(2 * spec.Layers * spec.KVHeads * spec.HeadDim * 2)
			factored, saved := 0, int64(0)
			for s, sp := range m.Segmentation.Spans {
				if !sp.Factored {
					continue
				}
				factored++
				cost, raw := spanCost(m, s), int64(sp.Len())*token
				if cost >= raw {
					t.Errorf("span %d (%d tokens): factors take %d bytes, its bf16 rows %d", s, sp.Len(), cost, raw)
				}
				saved += raw - cost
			}
			// What every memory carries, whatever is factored: the
			// records (summaries included), the extent's padding to a
			// block after each resident block and to 4 KiB, the trailer;
			// its resident rows in a 16-bit dtype are their bf16 size.
			fixed := size.Records + int64(2*spec.Layers*format.ChunkAlignment) + format.Alignment + format.TrailerSize
			t.Logf("%d of %d spans factored, stored %d = %.3f of raw bf16 %d (records %d)", factored, len(m.Segmentation.Spans),
				size.Stored(), float64(size.Stored())/float64(size.RawBF16), size.RawBF16, size.Records)
			if bound := size.RawBF16 + fixed - saved; size.Stored() > bound {
				t.Errorf("stored %d bytes, more than raw bf16 %d + fixed %d - saved %d", size.Stored(), size.RawBF16, fixed, saved)
			}
			if c.overflow {
				if factored > 0 {
					t.Errorf("%d spans factored in f16 with singular values past its range", factored)
				}
				return
			}
			if c.compressible && size.Stored() > size.RawBF16 {
				t.Errorf("stored %d bytes of compressible rows, more than raw bf16 %d (%d of %d spans factored)",
					size.Stored(), size.RawBF16, factored, len(m.Segmentation.Spans))
			}
		})
	}
}
