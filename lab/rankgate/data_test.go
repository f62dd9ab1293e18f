package rankgate

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/lab/llama"
	"github.com/kvstore/kvstore/reconstruct"
	"github.com/kvstore/kvstore/segment"
)

// TestSampleErrIsTruncation: a sample's Err(r) is the relative error of
// the span's rank-r truncated SVD, reconstructed.
func TestSampleErrIsTruncation(t *testing.T) {
	const rows, cols, r = 40, 16, 8
	rng := rand.New(rand.NewPCG(4, 4))
	x := make([]float32, rows*cols)
	for i := range x {
		x[i] = float32(rng.NormFloat64() * math.Pow(0.7, float64(i%cols)))
	}
	s, err := NewSample(x, rows, cols, 1, 2, true, r, 9)
	if err != nil {
		t.Fatal(err)
	}
	f, err := reconstruct.SVD(x, rows, cols, reconstruct.SVDOptions{MaxRank: r, Rank: r, Seed: 9})
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, e := range s.E {
		sum += e
	}
	if math.Abs(sum+s.Tail-1) > 1e-9 || s.Avail != r || s.Cost != float64((rows+cols+1)*2)/float64(rows*cols*2) {
		t.Fatalf("energies sum to %v with tail %v, avail %d, cost %v", sum, s.Tail, s.Avail, s.Cost)
	}
	for _, k := range []int{0, 3, r} {
		g := f.Truncate(k)
		var num, den float64
		for i := range rows {
			for j := range cols {
				var y float64
				for c := range k {
					y += float64(g.U[i*k+c]) * float64(g.S[c]) * float64(g.Vt[c*cols+j])
				}
				d := float64(x[i*cols+j]) - y
				num += d * d
				den += float64(x[i*cols+j]) * float64(x[i*cols+j])
			}
		}
		if got, want := s.Err(k), math.Sqrt(num/den); math.Abs(got-want) > 1e-4 {
			t.Fatalf("rank %d: Err %v, reconstructed %v", k, got, want)
		}
	}
}

// TestContextSamples: every factored span gives a K and a V sample per
// (layer, KV head), each with its energies summing to 1.
func TestContextSamples(t *testing.T) {
	cfg := llama.Config{Dim: 64, Hidden: 64, Layers: 2, Heads: 4, KVHeads: 2, Vocab: 64, SeqLen: 256,
		NormEps: 1e-5, RoPE: format.RoPE{Style: format.RoPEInterleaved, Theta: 10000}}
	m, err := llama.Random(cfg, 3)
	if err != nil {
		t.Fatal(err)
	}
	toks := make([]int, 96)
	for i := range toks {
		toks[i] = (i*i*5 + 3) % cfg.Vocab
	}
	seg := segment.Options{MinSpan: 8, MaxSpan: 24, MinFactored: 12}
	got, err := ContextSamples(m, toks, 8, seg)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) == 0 || len(got)%(2*cfg.Layers*cfg.KVHeads) != 0 {
		t.Fatalf("%d samples, want a positive multiple of %d", len(got), 2*cfg.Layers*cfg.KVHeads)
	}
	for i, s := range got {
		var sum float64
		for _, e := range s.E {
			sum += e
		}
		if math.Abs(sum+s.Tail-1) > 1e-6 || s.Rows < 12 || s.Cols != 16 || s.Value != (i%2 == 1) || len(s.Features) != 2*8+5 {
			t.Fatalf("sample %d: energy %v + tail %v, %dx%d, value %v", i, sum, s.Tail, s.Rows, s.Cols, s.Value)
		}
	}
}
