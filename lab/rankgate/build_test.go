package rankgate

import (
	"context"
	"math"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/lab/llama"
	"github.com/kvstore/kvstore/reconstruct"
	"github.com/kvstore/kvstore/segment"
	"github.com/kvstore/kvstore/store"
)

// TestSamplesAreWhatBuildSees: with a gate stored for the model, the
// ranks BuildSpanMemory keeps are GatePolicy's on ContextSamples of the
// same context, sample by sample: the trainer sees the spans, spectra and
// features the store's build does.
func TestSamplesAreWhatBuildSees(t *testing.T) {
	// Head dim 64 and spans of 64 to 128 tokens at r_max 32: the
	// randomized SVD, whose seeds must match Build's.
	cfg := llama.Config{Dim: 256, Hidden: 128, Layers: 2, Heads: 4, KVHeads: 2, Vocab: 64, SeqLen: 512,
		NormEps: 1e-5, RoPE: format.RoPE{Style: format.RoPEInterleaved, Theta: 10000}}
	m, err := llama.Random(cfg, 5)
	if err != nil {
		t.Fatal(err)
	}
	toks := make([]int, 320)
	for i := range toks {
		toks[i] = (i*i*3 + i + 7) % cfg.Vocab
	}
	const r = 32
	seg := segment.Options{MinSpan: 64, MaxSpan: 128, MinFactored: 12}
	samples, err := ContextSamples(m, toks, r, seg)
	if err != nil {
		t.Fatal(err)
	}
	// Hidden unit i reads sqrt(e_i); output i opens when it exceeds 0.2.
	p := &Params{R: r, H: r, W1: make([]float64, r*(2*r+5)), B1: make([]float64, r), W2: make([]float64, r*r), B2: make([]float64, r)}
	for i := range r {
		p.W1[i*(2*r+5)+i] = 4
		p.W2[i*r+i] = 10
		p.B2[i] = -10 * math.Tanh(4*0.2)
	}
	gate := p.Gate()

	db, err := store.Open("/rg", &store.Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	spec := m.Spec(format.DTypeF32, "rankgate-test")
	data, meta, err := store.EncodeRankGate(gate)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.PutArtifact(spec.Fingerprint(), store.ArtifactRankGate, data, meta); err != nil {
		t.Fatal(err)
	}
	res, err := m.Forward(toks, 0, nil, llama.ForwardOptions{})
	if err != nil {
		t.Fatal(err)
	}
	in := &store.SpanInput{Model: spec, Surprisal: make([]float32, len(toks))}
	in.Surprisal[0] = float32(math.NaN())
	for i := 1; i < len(toks); i++ {
		in.Surprisal[i] = float32(res.Surprisal[i-1])
	}
	for _, kv := range res.Cache.Layers {
		in.K, in.V = append(in.K, kv.K), append(in.V, kv.V)
	}
	mem, err := db.BuildSpanMemory(in, &store.SpanOptions{Segment: seg, SVD: reconstructMaxRank(r)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.PutSpanMemory(context.Background(), "ns", "c", mem); err != nil {
		t.Fatal(err)
	}
	policy := GatePolicy(gate)
	k, ranks := 0, map[int]bool{}
	for _, h := range mem.Heads {
		for s := range h.K {
			if h.K[s] == nil {
				continue
			}
			for _, f := range []int{h.K[s].Rank, h.V[s].Rank} {
				if k >= len(samples) {
					t.Fatalf("the build factored more spans than the %d samples", len(samples))
				}
				if want := policy(samples[k]); f != want {
					t.Fatalf("sample %d (layer %d, %d rows, value %v): built rank %d, gate on the sample %d", k, samples[k].Layer, samples[k].Rows, samples[k].Value, f, want)
				}
				ranks[f] = true
				k++
			}
		}
	}
	if k != len(samples) || len(ranks) < 2 {
		t.Fatalf("%d factors for %d samples, ranks %v", k, len(samples), ranks)
	}
}

func reconstructMaxRank(r int) reconstruct.SVDOptions { return reconstruct.SVDOptions{MaxRank: r} }
