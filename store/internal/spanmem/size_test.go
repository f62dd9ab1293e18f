package spanmem

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/lab/llama"
	"github.com/kvstore/kvstore/reconstruct"
	"github.com/kvstore/kvstore/segment"
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
// "gauss" isotropic noise, which no factor compresses, "mixed" low rank
// and noise in turns of 24 tokens; all times scale.
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
				noise := kind == "gauss" || (kind == "mixed" && tk/24%2 == 1)
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
					if !noise {
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

// spanCost is what a factored span takes but for its records: its factor
// blocks and its anchors' resident rows with their index entries.
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

// checkSized checks a memory Build made with the size rule: it checks, it
// takes at most its raw rows in the model's dtype (the raw bf16 rows for a
// 16-bit model) with every byte counted (Size: resident rows, factors,
// padding, trailer, root and head records with the summaries), storedBytes
// is that size, every factored span's factors and anchors take less room
// than its rows in bf16, and no two resident spans are neighbours.
func checkSized(t *testing.T, m *Memory) Size {
	t.Helper()
	if err := m.Check(); err != nil {
		t.Fatal(err)
	}
	size, err := m.Size()
	if err != nil {
		t.Fatal(err)
	}
	spec := &m.Model
	if want := size.RawBF16 * int64(spec.DType.Size()) / 2; size.Raw != want {
		t.Errorf("raw %d bytes in %v, want %d", size.Raw, spec.DType, want)
	}
	if size.Stored() > size.Raw || (spec.DType.Size() == 2 && size.Stored() > size.RawBF16) {
		t.Errorf("stored %d bytes, more than its raw rows: %d in %v, %d in bf16", size.Stored(), size.Raw, spec.DType, size.RawBF16)
	}
	if got := m.storedBytes(); got != size.Stored() {
		t.Errorf("storedBytes %d, Size says %d", got, size.Stored())
	}
	token := int64(2 * spec.Layers * spec.KVHeads * spec.HeadDim * 2)
	for s, sp := range m.Segmentation.Spans {
		if !sp.Factored {
			if s > 0 && !m.Segmentation.Spans[s-1].Factored {
				t.Errorf("spans %d and %d are both resident", s-1, s)
			}
			continue
		}
		if cost, raw := spanCost(m, s), int64(sp.Len())*token; cost >= raw {
			t.Errorf("span %d (%d tokens): factors take %d bytes, its bf16 rows %d", s, sp.Len(), cost, raw)
		}
	}
	return size
}

// TestSpanMemorySize: over made-up inputs of head dims 16 to 128 (low
// rank with a decaying spectrum, runs of repeated rows, isotropic noise,
// both in turns; scales from 2^-20 to 2^20; f16 and bf16 factors; 64 to
// 2,048 tokens; bf16, f16 and f32 specs) and the forward pass of a random
// Llama, Build with the size rule either refuses the memory
// (ErrNotSmaller) or makes one that checkSized passes: at most its raw
// rows. Where the rows compress (low rank, runs: what real keys and values
// look like, at head dims of 64 and more, over 300 tokens and more) it
// makes one; rows of noise whose factors keep every component (head dim
// 16, within r_max = 32) and rows whose singular values f16 cannot hold
// (scale 2^20, f16 factors) it refuses, as it does a context too short to
// pay for a memory's fixed bytes. (Noise of wider heads in spans longer
// than about 40 tokens is cut to r_max components, smaller than its rows.)
// With FactorAll it builds every one of them.
func TestSpanMemorySize(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 17))
	type tc struct {
		name         string
		in           *Input
		opts         Options
		compressible bool // rank 8 of 64 dims and more, 300 tokens and more: the memory is built
		refused      bool // nothing compresses (noise at full rank, f16 overflow): the memory is refused
	}
	var cases []tc
	dtypes := []format.DType{format.DTypeBF16, format.DTypeF16, format.DTypeF32}
	for _, hd := range []int{16, 64, 128} {
		for _, kind := range []string{"lowrank", "runs", "gauss", "mixed"} {
			for _, sc := range []float64{0x1p-20, 1, 0x1p10, 0x1p20} {
				for _, fdt := range []format.DType{0, format.DTypeBF16} {
					dt, tokens := dtypes[rng.IntN(len(dtypes))], []int{64, 300, 700, 1200, 2048}[rng.IntN(5)]
					overflow := fdt == 0 && sc >= 0x1p20
					cases = append(cases, tc{fmt.Sprintf("hd%d %v %s x%g %d tokens factors %v", hd, dt, kind, sc, tokens, fdt),
						sizeInput(t, rng, sizeSpec(t, hd, dt), tokens, kind, sc), Options{FactorDType: fdt},
						(kind == "lowrank" || kind == "runs") && hd >= 64 && tokens >= 300 && !overflow && !(fdt == 0 && sc >= 0x1p10),
						(kind == "gauss" && hd < reconstruct.DefaultMaxRank) || overflow})
				}
			}
		}
	}
	for _, tokens := range []int{64, 200, 500, 1500} {
		cases = append(cases, tc{fmt.Sprintf("random llama %d tokens", tokens), testInput(t, tokens, 0), Options{}, false, false})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, err := Build(c.in, &c.opts, &artifacts{})
			switch {
			case errors.Is(err, ErrNotSmaller):
				if c.compressible {
					t.Errorf("compressible rows refused: %v", err)
				}
			case err != nil:
				t.Fatal(err)
			default:
				if c.refused {
					t.Errorf("rows that do not compress built")
				}
				size := checkSized(t, m)
				factored := 0
				for _, sp := range m.Segmentation.Spans {
					if sp.Factored {
						factored++
					}
				}
				t.Logf("%d of %d spans factored, stored %d = %.3f of raw %d (records %d)", factored, len(m.Segmentation.Spans),
					size.Stored(), float64(size.Stored())/float64(size.Raw), size.Raw, size.Records)
			}
			all := c.opts
			all.FactorAll = true
			if _, err := Build(c.in, &all, &artifacts{}); err != nil && !(c.opts.FactorDType == 0 && errors.Is(err, ErrInvalidArgument)) {
				t.Errorf("FactorAll: %v", err)
			}
		})
	}
}

// sizeOfChoice is storedBytes of the memory all (built with FactorAll)
// would be with only the spans in factored keeping their factors, the
// others resident and each run of resident spans merged into one.
func sizeOfChoice(all *Memory, factored []bool, keepResident bool) int64 {
	seg := *all.Segmentation
	seg.Spans = nil
	var keep []int
	for s, sp := range all.Segmentation.Spans {
		sp.Factored = factored[s]
		if n := len(seg.Spans); !keepResident && n > 0 && !sp.Factored && !seg.Spans[n-1].Factored {
			seg.Spans[n-1].End = sp.End
			continue
		}
		seg.Spans, keep = append(seg.Spans, sp), append(keep, s)
	}
	m := *all
	m.Segmentation, m.Resident, m.Heads = &seg, residentRows(&seg), make([]Head, len(all.Heads))
	for g, h := range all.Heads {
		m.Heads[g] = Head{K: make([]*reconstruct.Factors, len(keep)), V: make([]*reconstruct.Factors, len(keep))}
		for i, s := range keep {
			if factored[s] {
				m.Heads[g].K[i], m.Heads[g].V[i] = h.K[s], h.V[s]
			}
		}
	}
	return m.storedBytes()
}

// TestSettleSmallest: the spans settle keeps factored make the smallest
// memory of every choice that keeps factors only where they and the
// span's anchors take less room than its rows in bf16 (all 2^n choices
// of up to 13 such spans tried), to within what is not linear in the
// choice: the padding of the resident blocks and of the extent to 4 KiB;
// and every span's summary, merged ones' too, is its rows'. With
// KeepResidentSpans (the last two contexts) no run is merged, in settle's
// choice and in the ones it is weighed against.
func TestSettleSmallest(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 3))
	seg := segment.Options{MinSpan: 8, MaxSpan: 24, MinFactored: 12}
	kinds := []string{"mixed", "mixed", "lowrank", "runs", "mixed", "gauss", "runs", "mixed"}
	for i, kind := range kinds {
		dt := []format.DType{format.DTypeBF16, format.DTypeF32}[i%2]
		keep := i >= len(kinds)-2
		t.Run(fmt.Sprintf("%s %v keep %v", kind, dt, keep), func(t *testing.T) {
			in := sizeInput(t, rng, sizeSpec(t, 64, dt), 150+rng.IntN(60), kind, 1)
			b, err := prepare(in, &Options{Segment: seg, KeepResidentSpans: keep}, &artifacts{})
			if err != nil {
				t.Fatal(err)
			}
			all, err := Build(in, &Options{Segment: seg, FactorAll: true}, &artifacts{})
			if err != nil {
				t.Fatal(err)
			}
			spec := &all.Model
			token := int64(2 * spec.Layers * spec.KVHeads * spec.HeadDim * 2)
			var eligible []int
			for s, sp := range all.Segmentation.Spans {
				if sp.Factored && spanCost(all, s) < int64(sp.Len())*token {
					eligible = append(eligible, s)
				}
			}
			if len(eligible) > 13 {
				t.Fatalf("%d spans to choose from", len(eligible))
			}
			best, choice := int64(math.MaxInt64), make([]bool, len(all.Segmentation.Spans))
			for set := range 1 << len(eligible) {
				for j, s := range eligible {
					choice[s] = set>>j&1 == 1
				}
				best = min(best, sizeOfChoice(all, choice, keep))
			}
			got, slack := b.m.storedBytes(), int64(2*spec.Layers*format.ChunkAlignment+format.Alignment)
			factored := 0
			for _, sp := range b.m.Segmentation.Spans {
				if sp.Factored {
					factored++
				}
			}
			t.Logf("%d spans, %d could keep factors, %d do: %d bytes, the smallest choice %d", len(all.Segmentation.Spans),
				len(eligible), factored, got, best)
			if got > best+slack {
				t.Errorf("settle's choice takes %d bytes, the smallest %d", got, best)
			}
			if keep && len(b.m.Segmentation.Spans) != len(all.Segmentation.Spans) {
				t.Errorf("KeepResidentSpans: %d spans, the segmentation cut %d", len(b.m.Segmentation.Spans), len(all.Segmentation.Spans))
			}
			checkSummaries(t, b)
		})
	}
}

// checkSummaries checks that every span of b's memory has the summary of
// its pre-RoPE keys and values (segment.Summarize), runs of resident spans
// merged into one included.
func checkSummaries(t *testing.T, b *build) {
	t.Helper()
	spec, n := b.in.Model, len(b.in.Surprisal)
	for g, h := range b.m.Heads {
		l, kv := g/spec.KVHeads, g%spec.KVHeads
		for s, sp := range b.m.Segmentation.Spans {
			want, err := segment.Summarize(b.rows(b.pre[l], kv, sp.Start, sp.End), b.rows(b.in.V[l], kv, sp.Start, sp.End),
				spec.HeadDim, b.in.Surprisal[sp.Start:sp.End], b.projs[g])
			if err != nil {
				t.Fatal(err)
			}
			if got := h.Summaries[s]; fmt.Sprint(got.Key, got.Value, got.Proj) != fmt.Sprint(want.Key, want.Value, want.Proj) {
				t.Fatalf("group %d span %d [%d, %d) of %d: summary is not its rows'", g, s, sp.Start, sp.End, n)
			}
		}
	}
}
