package quality

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/kvstore/kvstore/format"
)

var boundMethods = []string{MethodSpanBound, MethodSpanBoundWindow, MethodSpanBoundCh, MethodSpanBoundChWindow, MethodSpanMeanKey, MethodSpanMeanKeyWindow,
	MethodSpanAnchor, MethodSpanAnchorWindow, MethodSpanAnchorBoundCh}

// TestSpanBound runs span+bound, span+bound-ch, span+meankey, span+anchor,
// span+anchor+bound-ch and the +window variants on two short
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

// TestAnchorNear: span+anchor costs no row beyond span memory's own, and
// each resident row raises the score of the zoomable span it lies in and
// of the one starting right after it, no other.
func TestAnchorNear(t *testing.T) {
	m, ctx, res, h := needlePrefill(t)
	cfg := Config{Model: m, Context: 2 * sinks, Continuation: 1, Name: "anchor"}
	cfg.ensureDefaults()
	s, err := newSpanStore(m, res.Cache, h, &cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	b := len(ctx) / 4
	plain := newSpanMethod(s, h, b, cfg.AnchorShare, false)
	bs, err := newBoundSpan(s, h, b, cfg.AnchorShare, 0, boundMode{anchorsOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if bs.fixedRows != plain.fixedRows || bs.zoom != plain.zoom {
		t.Errorf("span+anchor: %v fixed rows, zoom %d; span: %v, %d", bs.fixedRows, bs.zoom, plain.fixedRows, plain.zoom)
	}
	meta := s.meta
	if len(bs.near) != len(bs.resIdx) || len(bs.resIdx) == 0 {
		t.Fatalf("%d near entries for %d resident rows", len(bs.near), len(bs.resIdx))
	}
	raised := 0
	for j, i := range bs.resIdx {
		tok := meta.Resident[i]
		for k, sp := range bs.near[j] {
			if sp < 0 {
				continue
			}
			raised++
			info := meta.Spans[sp]
			if bs.rt.SpanTokens[sp] == 0 {
				t.Errorf("row %d raises span %d, which has no row to zoom", tok, sp)
			}
			if k == 0 && !(info.Start <= tok && tok < info.End) {
				t.Errorf("row %d raises span %d [%d, %d) as its own", tok, sp, info.Start, info.End)
			}
			if k == 1 && info.Start != tok+1 {
				t.Errorf("row %d raises span %d [%d, %d) as the next", tok, sp, info.Start, info.End)
			}
		}
	}
	if raised == 0 {
		t.Errorf("no resident row raises a span of %d", len(meta.Spans))
	}
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

// TestOnlyRefusesUnmeasured: LongConfig.Only naming a method the
// configuration does not measure is an error, not a method quietly left
// out of the table.
func TestOnlyRefusesUnmeasured(t *testing.T) {
	m, _ := longCtxOrSkip(t, 512)
	for _, c := range []struct {
		only  []string
		bound bool
		ok    bool
	}{
		{[]string{MethodTop, MethodSpan}, false, true},
		{[]string{MethodSpanAnchor}, false, false},
		{[]string{MethodSpanAnchor, MethodFull}, true, true},
		{[]string{"span+anchors"}, true, false},
		{[]string{MethodSpanOracle}, true, false},
	} {
		lc := LongConfig{Model: m, Budgets: []float64{0.1}, Bound: c.bound, Only: c.only}
		err := lc.defaults()
		if (err == nil) != c.ok || (err != nil && !errors.Is(err, format.ErrInvalidArgument)) {
			t.Errorf("Only %q, Bound %v: %v, want ok %v", c.only, c.bound, err, c.ok)
		}
	}
}
