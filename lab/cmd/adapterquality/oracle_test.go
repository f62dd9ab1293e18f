package main

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/kvstore/kvstore/adapter"
	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/lab/llama"
	"github.com/kvstore/kvstore/lab/train"
)

// The oracle with the true predecessors rebuilds the full recompute (KL
// 0), the one with no context is the untrained one-row hidden BOS header,
// and another request's context is neither.
func TestOracle(t *testing.T) {
	m, err := llama.Random(llama.Config{Dim: 16, Hidden: 24, Layers: 2, Heads: 2, KVHeads: 1, Vocab: 32, SeqLen: 256,
		NormEps: 1e-5, RoPE: format.RoPE{Style: format.RoPEInterleaved, Theta: 10000}}, 5)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(2, 3))
	toks := func(n int) []int {
		x := make([]int, n)
		for i := range x {
			x[i] = 2 + rng.IntN(30)
		}
		return x
	}
	var rs []train.Request
	for i := range 4 {
		r := train.Request{Question: toks(3)}
		for range 2 + i%2 {
			r.Docs = append(r.Docs, toks(5))
		}
		rs = append(rs, r)
	}
	refs, err := references(m, rs, 3)
	if err != nil {
		t.Fatal(err)
	}
	score := func(s string) scores {
		o, err := oracleOf(s)
		if err != nil {
			t.Fatal(err)
		}
		sc, err := o.evaluate(m, rs, refs)
		if err != nil {
			t.Fatal(err)
		}
		return sc
	}
	if s := score("all"); s.KLCont > 1e-6 || s.Top1Cont != 1 {
		t.Fatalf("true predecessors: KL %g, top-1 %v, want the full recompute", s.KLCont, s.Top1Cont)
	}
	bos, err := adapter.InitToken(m, 1, 0, train.BOS)
	if err != nil {
		t.Fatal(err)
	}
	hidden, err := evaluate(m, bos, rs, refs)
	if err != nil {
		t.Fatal(err)
	}
	none, err := evaluate(m, nil, rs, refs)
	if err != nil {
		t.Fatal(err)
	}
	zero := score("0")
	if math.Abs(zero.KLCont-hidden.KLCont) > 1e-5 || math.Abs(zero.KLNext-hidden.KLNext) > 1e-5 || !(math.Abs(zero.KLCont-none.KLCont) > 1e-4) {
		t.Fatalf("no context: KL %g / %g, hidden BOS header %g / %g, no adapter %g", zero.KLNext, zero.KLCont, hidden.KLNext, hidden.KLCont, none.KLCont)
	}
	if s := score("other"); !(s.KLCont > 1e-4) {
		t.Fatalf("another request's context: KL %g", s.KLCont)
	}
	if _, err := oracleOf("-1"); err == nil {
		t.Fatal("-oracle -1 accepted")
	}
}
