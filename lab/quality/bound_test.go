package quality

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

var boundMethods = []string{MethodSpanBound, MethodSpanBoundWindow, MethodSpanBoundCh, MethodSpanBoundChWindow, MethodSpanMeanKey, MethodSpanMeanKeyWindow}

// TestSpanBound runs span+bound, span+bound-ch, span+meankey and their
// +window variants on two short
// needles: every bound a step computes is at least the largest true logit
// of the span's reconstructed keys it bounds (an upper bound by
// construction), each method keeps within its budget's rows with the
// bounds counted, and its logits are finite.
func TestSpanBound(t *testing.T) {
	m, files := longCtxOrSkip(t, 512)
	var checked, violated int
	var worst float64
	lc := LongConfig{Model: m, Budgets: []float64{0.10, 0.25}, Bound: true, boundCheck: func(bound, logit float64) {
		checked++
		// Both sums are float64 of the same float32 products; a slack of
		// float64 rounding only.
		if d := logit - bound; d > 1e-9*(1+math.Abs(bound)) {
			violated++
			worst = max(worst, d)
		}
	}}
	if err := lc.defaults(); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for i, depth := range []float64{0.15, 0.6} {
		filler, err := goBytes(files[i], 512)
		if err != nil {
			t.Fatal(err)
		}
		nd, err := NewNeedle(filler, 512, 1, depth, rng)
		if err != nil {
			t.Fatal(err)
		}
		runs, err := lc.runMethods(nd.Tokens[:nd.Context], nd.Tokens[nd.Context:], nd.Query)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]int{}
		for _, r := range runs {
			seen[r.Method]++
			s := scoreNeedle(nd, r.Logits)
			t.Logf("needle %d %4.2f %-18s top-1 %.2f log-prob %.2f rows %v/%v over %v", i, r.Budget, r.Method, s.Top1, s.LogProb, r.Rows, r.Limit, r.Over)
			if !slices.Contains(boundMethods, r.Method) {
				continue
			}
			if r.Rows > r.Limit || r.Over {
				t.Errorf("needle %d: %s at %v: %v rows over the budget's %v (over %v)", i, r.Method, r.Budget, r.Rows, r.Limit, r.Over)
			}
			if math.IsNaN(s.LogProb) || math.IsInf(s.LogProb, 0) {
				t.Errorf("needle %d: %s at %v: log-prob %v", i, r.Method, r.Budget, s.LogProb)
			}
		}
		for _, name := range boundMethods {
			if seen[name] != len(lc.Budgets) {
				t.Errorf("needle %d: %d %s runs for %d budgets", i, seen[name], name, len(lc.Budgets))
			}
		}
	}
	if checked == 0 || violated > 0 {
		t.Errorf("%d of %d bounds below the span's largest logit (by up to %v)", violated, checked, worst)
	}
	t.Logf("%d bounds checked", checked)
}

// TestKeyBound: the bound of a box of keys is reached by the box's corner
// the query points to, and is at least q . k for every key in the box.
func TestKeyBound(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	const hd = 8
	for range 100 {
		q, lo, hi := make([]float32, hd), make([]float32, hd), make([]float32, hd)
		corner := make([]float32, hd)
		for j := range hd {
			q[j] = float32(rng.NormFloat64())
			a, b := float32(rng.NormFloat64()), float32(rng.NormFloat64())
			lo[j], hi[j] = min(a, b), max(a, b)
			corner[j] = lo[j]
			if q[j] > 0 {
				corner[j] = hi[j]
			}
		}
		b := keyBound(q, lo, hi)
		if c := dot64(q, corner); math.Abs(c-b) > 1e-12*(1+math.Abs(b)) {
			t.Fatalf("bound %v, corner's logit %v", b, c)
		}
		for range 20 {
			k := make([]float32, hd)
			for j := range hd {
				k[j] = lo[j] + float32(rng.Float64())*(hi[j]-lo[j])
			}
			if l := dot64(q, k); l > b+1e-12*(1+math.Abs(b)) {
				t.Fatalf("logit %v above the bound %v", l, b)
			}
		}
	}
}
