package store

import (
	"math"
	"testing"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/reconstruct"
)

// spectrumGate is a rank gate of r_max r that keeps component i when its
// normalised singular value s_i / ||X||_F exceeds 0.15: hidden unit i reads
// feature i, output i reads hidden unit i.
func spectrumGate(r int) *RankGate {
	in := RankGateInputs(r)
	g := &RankGate{MaxRank: r, Hidden: r, W1: make([]float32, r*in), B1: make([]float32, r),
		W2: make([]float32, r*r), B2: make([]float32, r)}
	for i := range r {
		g.W1[i*in+i] = 4
		g.W2[i*r+i] = 10
		g.B2[i] = float32(-10 * math.Tanh(4*0.15))
	}
	return g
}

// TestSpanMemoryRankGate: with a rank gate stored for the model, every
// factored span keeps the rank the gate predicts from its spectrum, and
// the memory reads back with those ranks.
func TestSpanMemoryRankGate(t *testing.T) {
	db, _, _ := openSpanDB(t, false)
	defer db.Close()
	// Varied text and every span factored: the gate must see spectra of
	// several shapes (the default fixture's rows have rank at most 4).
	model, in := spanFixtureText(t, 100, 7, format.DTypeF32, func(i int) int { return i*i*7 + i*3 + 1 })
	spec := in.Model
	g := spectrumGate(spec.HeadDim)
	data, meta, err := EncodeRankGate(g)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.PutArtifact(spec.Fingerprint(), ArtifactRankGate, data, meta); err != nil {
		t.Fatal(err)
	}
	m := buildSpans(t, db, in, SpanOptions{FactorDType: format.DTypeF32, FactorAll: true})
	r := putOpenSpan(t, db, m, "ctx-1")
	defer r.Release()
	hd, n := spec.HeadDim, m.Tokens
	ranks := map[int]bool{}
	for l := range spec.Layers {
		for h := range spec.KVHeads {
			for s, sp := range m.Segmentation.Spans {
				if !sp.Factored {
					continue
				}
				k := append([]float32(nil), in.K[l][(h*n+sp.Start)*hd:(h*n+sp.End)*hd]...)
				for i := range sp.Len() {
					reconstruct.Unapply(model.RoPE(), k[i*hd:(i+1)*hd], in.BasePosition+int64(sp.Start+i))
				}
				v := in.V[l][(h*n+sp.Start)*hd : (h*n+sp.End)*hd]
				for _, c := range []struct {
					kind  format.ChunkKind
					rows  []float32
					value bool
				}{{format.ChunkK, k, false}, {format.ChunkV, v, true}} {
					want := predictedRank(t, g, c.rows, sp.Len(), hd, l, spec.Layers, c.value)
					ranks[want] = true
					f, err := r.Factors(l, h, s, c.kind)
					if err != nil {
						t.Fatal(err)
					}
					if f.Rank != want {
						t.Fatalf("layer %d head %d span %d %v: stored rank %d, the gate predicts %d", l, h, s, c.kind, f.Rank, want)
					}
				}
			}
		}
	}
	if len(ranks) < 2 {
		t.Fatalf("the gate predicted one rank for every span (%v): the fixture does not exercise it", ranks)
	}
	kk, vv := make([]float32, 16*hd), make([]float32, 16*hd)
	sp := m.Segmentation.Spans[firstFactored(t, r.Meta())]
	if err := r.ReconstructSpan(0, 0, firstFactored(t, r.Meta()), r.Meta().BasePosition, kk[:sp.Len()*hd], vv[:sp.Len()*hd]); err != nil {
		t.Fatal(err)
	}
}

// predictedRank is the gate's rank of a span's rows (rows x cols) from its
// exact spectrum (r_max = cols: the whole SVD).
func predictedRank(t *testing.T, g *RankGate, x []float32, rows, cols, layer, layers int, value bool) int {
	t.Helper()
	f, err := reconstruct.SVD(x, rows, cols, reconstruct.SVDOptions{MaxRank: g.MaxRank, Rank: g.MaxRank})
	if err != nil {
		t.Fatal(err)
	}
	var total float64
	for _, e := range x {
		total += float64(e) * float64(e)
	}
	return g.Rank(f.S, total, rows, cols, layer, layers, value)
}
