package quality

import (
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/lab/llama"
	"github.com/kvstore/kvstore/lab/router"
)

// TestHeadRetrieval: every KV head's attention share on the recalled
// definition is in [0, 1], and on gocode-2k some heads retrieve and some
// do not (measured on 2,048-byte windows of non-test Go: layers 1 and 2's
// second KV heads 0.15 and 0.24, the others 0.02 or less). Split by
// depth, the thirds hold every needle and their needle-weighted mean is
// the whole set's share. Bad needles are refused.
func TestHeadRetrieval(t *testing.T) {
	m, files := longCtxOrSkip(t, 512)
	cfg := NeedleConfig{LongConfig: LongConfig{Model: m}, Files: files, Window: 512, Needles: 3, Seed: 5}
	mass, err := HeadRetrievalOn(cfg)
	if err != nil {
		t.Fatal(err)
	}
	thirds, count, err := HeadRetrievalByDepth(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if count[0]+count[1]+count[2] != cfg.Needles {
		t.Fatalf("thirds of %v needles, want %d in all", count, cfg.Needles)
	}
	for gi, v := range mass {
		var w float64
		for i, th := range thirds {
			if (th == nil) != (count[i] == 0) {
				t.Fatalf("third %d: %d needles, shares %v", i, count[i], th)
			}
			if th != nil {
				w += th[gi] * float64(count[i]) / float64(cfg.Needles)
			}
		}
		if math.Abs(w-v) > 1e-9 {
			t.Errorf("head %d: thirds' mean %v, the whole set's %v", gi, w, v)
		}
	}
	if _, _, err := HeadRetrievalByDepth(NeedleConfig{}); !errors.Is(err, format.ErrInvalidArgument) {
		t.Errorf("no model: %v", err)
	}
	if len(mass) != m.Layers*m.KVHeads {
		t.Fatalf("%d heads, want %d", len(mass), m.Layers*m.KVHeads)
	}
	heads := RetrievalHeads(mass, DefaultRetrievalMass)
	n := 0
	for gi, v := range mass {
		t.Logf("layer %d KV head %d: %.3f %v", gi/m.KVHeads, gi%m.KVHeads, v, heads[gi])
		if !(v >= 0 && v <= 1) {
			t.Errorf("head %d: share %v", gi, v)
		}
		if heads[gi] {
			n++
		}
	}
	if n == 0 || n == len(mass) {
		t.Errorf("%d of %d heads retrieve: the split is not measured", n, len(mass))
	}
	if _, err := HeadRetrieval(m, nil); !errors.Is(err, format.ErrInvalidArgument) {
		t.Errorf("no needles: %v", err)
	}
	bad := &Needle{Tokens: []int{GoBOS, 'a', 'b', 'c'}, Context: 2, Query: 1, ValueLen: 1, Def: [2]int{1, 5}}
	if _, err := HeadRetrieval(m, []*Needle{bad}); !errors.Is(err, format.ErrInvalidArgument) {
		t.Errorf("a definition past the context: %v", err)
	}
}

// TestHeadSplit: span+heads gives the streaming heads exactly the sinks
// and the last rows, the retrieval heads span memory that holds more than
// the per-head budget, and in every step the mean over heads within it;
// through the needle runner it stays within budget and recalls.
func TestHeadSplit(t *testing.T) {
	m, ctx, res, h := needlePrefill(t)
	s, cfg, retrieval := headStore(t, m, res, h)
	groups := m.Layers * m.KVHeads
	n, b := len(ctx), len(ctx)/10
	if _, err := newHeadSplit(s, h, res.Cache, b, &LongConfig{Span: cfg, StreamShare: 0.5, Retrieval: retrieval[:3]}, 0); !errors.Is(err, format.ErrInvalidArgument) {
		t.Fatalf("3 flags for %d heads: %v", groups, err)
	}
	// Uncapped, a streaming head keeps half the budget; capped at 15% of
	// the context, a retrieval head keeps that and the streaming heads
	// the rest.
	for _, c := range []struct {
		cap     float64
		w, most int
	}{{0, b / 2, (groups*b - (groups-2)*(b/2)) / 2}, {0.15, (groups*b - 2*(n*15/100)) / (groups - 2), n * 15 / 100}} {
		hs, err := newHeadSplit(s, h, res.Cache, b, &LongConfig{Span: cfg, StreamShare: 0.5, RetrievalCap: c.cap, Retrieval: retrieval}, 0)
		if err != nil {
			t.Fatal(err)
		}
		win := windowTokens(n, c.w)
		// The window's rows as the memory holds them (TestMemoryRows
		// checks those against the prefill and the factors).
		stored, err := s.keepRows(win)
		if err != nil {
			t.Fatal(err)
		}
		most := 0
		check := &rowsSeen{inner: hs, each: func(layer int, sets []rowSet) {
			for g, rs := range sets {
				rows := len(rs.k) / s.hd
				if !retrieval[layer*m.KVHeads+g] {
					if rows != len(win) {
						t.Fatalf("cap %v: streaming head (%d, %d): %d rows, want %d", c.cap, layer, g, rows, len(win))
					}
					want := stored.sets[layer][g]
					if !slices.Equal(rs.k, want.k) || !slices.Equal(rs.v, want.v) {
						t.Fatalf("cap %v: streaming head (%d, %d): rows are not the stored memory's of the window", c.cap, layer, g)
					}
					continue
				}
				most = max(most, rows)
			}
		}}
		if _, err := decode(m, check, ctx[n-16:], n); err != nil {
			t.Fatal(err)
		}
		if hs.maxRows > float64(b) || hs.fixed > float64(b) || most <= b || most > c.most {
			t.Errorf("cap %v: most rows per head at a step %.1f, fixed %.1f, budget %d; a retrieval head held %d (its share %d rows)", c.cap, hs.maxRows, hs.fixed, b, most, c.most)
		}
	}
	_, files := longCtxOrSkip(t, 512)
	lc := LongConfig{Model: m, Budgets: []float64{0.10, 0.25}, Retrieval: retrieval, Span: cfg, Only: []string{MethodSpanHeads}}
	rows, _, err := RunNeedles(NeedleConfig{LongConfig: lc, Files: files, Window: 512, Needles: 3, Keys: 1, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		t.Logf("%-4.2f %-12s top-1 %.2f log-prob %.2f rows %.3f", r.Budget, r.Method, r.Top1, r.LogProb, r.Rows)
		if r.OverBudget || r.Rows > r.Budget {
			t.Errorf("%s at %v: %.3f of the context, over budget", r.Method, r.Budget, r.Rows)
		}
		if r.Method == MethodSpanHeads && r.Budget == 0.25 && !(r.Top1 >= 0.25) {
			t.Errorf("%s at 25%%: top-1 per byte %.2f, want >= 0.25 (full KV 0.48 on these needles)", r.Method, r.Top1)
		}
	}
}

// rowsSeen hands each layer's row sets of inner to each before returning
// them.
type rowsSeen struct {
	inner method
	each  func(layer int, sets []rowSet)
}

func (c *rowsSeen) rows(a *llama.StepAttention) ([]rowSet, error) {
	sets, err := c.inner.rows(a)
	if err == nil {
		c.each(a.Layer, sets)
	}
	return sets, err
}

// TestHeadSplitZoomThreshold: with ZoomTau a retrieval head zooms only
// spans whose score passes it, with ZoomRel only those within that share
// of its best: tau 1 zooms nothing (the resident anchors alone, the same
// rows every step), ZoomRel 1 the best span alone, and at the first
// retrieval layer of the first step, where every setting sees the same
// query, no threshold zooms more rows than none. Out-of-range values are
// refused.
func TestHeadSplitZoomThreshold(t *testing.T) {
	m, ctx, res, h := needlePrefill(t)
	for _, c := range []LongConfig{{Model: m, ZoomTau: 1.5}, {Model: m, ZoomTau: -0.1}, {Model: m, ZoomRel: 2}, {Model: m, ZoomRel: -1},
		{Model: m, ZoomGate: 1.1}, {Model: m, ZoomGate: -0.5}, {Model: m, StreamTop: 2}, {Model: m, StreamTop: -1},
		{Model: m, ZoomTauHead: []float64{0.02}}, {Model: m, ZoomTauHead: make([]float64, m.Layers*m.KVHeads+1)},
		{Model: m, ZoomTauHead: append(make([]float64, m.Layers*m.KVHeads-1), 1.5)}} {
		if err := c.defaults(); !errors.Is(err, format.ErrInvalidArgument) {
			t.Errorf("zoom tau %v (per head %v), relative %v, gate %v, stream top %v: %v", c.ZoomTau, c.ZoomTauHead, c.ZoomRel, c.ZoomGate, c.StreamTop, err)
		}
	}
	s, cfg, retrieval := headStore(t, m, res, h)
	n, b := len(ctx), len(ctx)/4
	// rows are a retrieval head's rows at each (step, layer) in decode
	// order; anchors its resident rows.
	run := func(tau, rel float64) (rows []int, anchors, longest int) {
		hs, err := newHeadSplit(s, h, res.Cache, b, &LongConfig{Span: cfg, StreamShare: 0.5, Retrieval: retrieval, ZoomTau: tau, ZoomRel: rel}, 0)
		if err != nil {
			t.Fatal(err)
		}
		check := &rowsSeen{inner: hs, each: func(layer int, sets []rowSet) {
			for g, rs := range sets {
				if retrieval[layer*m.KVHeads+g] {
					rows = append(rows, len(rs.k)/s.hd)
				}
			}
		}}
		if _, err := decode(m, check, ctx[n-16:], n); err != nil {
			t.Fatal(err)
		}
		if hs.maxRows > float64(b) {
			t.Errorf("tau %v, relative %v: %.1f rows per head, budget %d", tau, rel, hs.maxRows, b)
		}
		for _, k := range hs.bs.rt.SpanTokens {
			longest = max(longest, k)
		}
		return rows, len(hs.bs.resIdx), longest
	}
	base, anchors, longest := run(0, 0)
	none, _, _ := run(1, 0)
	top, _, _ := run(0, 1)
	mid, _, _ := run(0.02, 0)
	zoomed, topZoomed := 0, 0
	for i := range base {
		if none[i] != anchors {
			t.Fatalf("tau 1: (step, layer) %d: %d rows, want the %d anchors alone", i, none[i], anchors)
		}
		if top[i] < anchors || top[i] > anchors+longest {
			t.Fatalf("relative 1: (step, layer) %d: %d rows, want %d anchors and one span of at most %d", i, top[i], anchors, longest)
		}
		if base[i] < anchors || mid[i] < anchors {
			t.Fatalf("(step, layer) %d: %d and %d rows, fewer than the %d anchors", i, base[i], mid[i], anchors)
		}
		zoomed += base[i] - anchors
		topZoomed += top[i] - anchors
	}
	if zoomed == 0 || topZoomed == 0 || !(top[0] <= base[0] && mid[0] <= base[0]) {
		t.Errorf("first step, layer 1: %d rows without a threshold, %d at tau 0.02, %d at relative 1; %d and %d zoomed rows in all without a threshold and at relative 1", base[0], mid[0], top[0], zoomed, topZoomed)
	}
}

// headStore is span memory of a needle prefill with "More anchors"'
// anchors (alpha 0.5, share 0.85), closed when t ends, and gocode-2k's
// retrieval heads (layers 1 and 2's KV head 1).
func headStore(t *testing.T, m *llama.Model, res *llama.Result, h []float32) (*spanStore, Config, []bool) {
	t.Helper()
	cfg := Config{Model: m, Context: 2 * sinks, Continuation: 1, Name: "heads", AnchorShare: 0.85}
	cfg.Segment.AnchorAlpha = 0.5
	cfg.ensureDefaults()
	s, err := newSpanStore(m, res.Cache, h, &cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.close() })
	retrieval := make([]bool, m.Layers*m.KVHeads)
	retrieval[1*m.KVHeads+1], retrieval[2*m.KVHeads+1] = true, true
	return s, cfg, retrieval
}

// reportedHeads is the reported span+heads memory's settings
// (docs/quality.md, "A recent window read from the memory": size rule, raw
// spans, bf16 rows, the last 12.5% resident, streaming heads at rank 1,
// anchors alpha 0.5 and share 0.85) and gocode-2k's retrieval heads
// (layers 1 and 2's KV head 1).
func reportedHeads(m *llama.Model) (Config, []bool) {
	retrieval := make([]bool, m.Layers*m.KVHeads)
	retrieval[1*m.KVHeads+1], retrieval[2*m.KVHeads+1] = true, true
	span := Config{AnchorShare: 0.85, SizeRule: true, RawSpans: true, RowDType: format.DTypeBF16, Energy: 0.99, ResidentTail: 0.125,
		HeadRank: StreamRank(retrieval, 1)}
	span.Segment.AnchorAlpha = 0.5
	return span, retrieval
}

func TestZoomThresholds(t *testing.T) {
	nan := float32(math.NaN())
	scores := [][]float32{{0.5, 0.01, nan}, {0.03, 0.02, 0.001}, {nan, nan, nan}}
	for _, c := range []struct {
		tau, rel, gate float32
		head           []float32 // per-group tau where above 0
		want           []float32
	}{
		{0, 0, 0, nil, []float32{-1, -1, -1}},
		{0.02, 0, 0, nil, []float32{0.02, 0.02, 0.02}},
		// A group's own tau replaces tau; 0 leaves it.
		{0.02, 0, 0, []float32{1, 0, 0.05}, []float32{1, 0.02, 0.05}},
		{0, 0, 0, []float32{0, 0.1, 0}, []float32{-1, 0.1, -1}},
		{0, 0.5, 0, []float32{0.3, 0, 0}, []float32{0.3, math.Nextafter32(0.015, -1), math.Nextafter32(0, -1)}},
		// rel: just under rel times the group's best, so that the best passes.
		// (A group of no scores gets just under 0: nothing to zoom.)
		{0, 0.5, 0, nil, []float32{math.Nextafter32(0.25, -1), math.Nextafter32(0.015, -1), math.Nextafter32(0, -1)}},
		{0.02, 0.5, 0, nil, []float32{math.Nextafter32(0.25, -1), 0.02, 0.02}},
		// gate: only groups whose best score reaches it are thresholded.
		{0.02, 0, 0.1, nil, []float32{0.02, -1, -1}},
		{0.02, 0, 0.03, nil, []float32{0.02, 0.02, -1}},
		{0.02, 0.5, 0.6, nil, []float32{-1, -1, -1}},
	} {
		lc := &LongConfig{ZoomTau: float64(c.tau)}
		for _, h := range c.head {
			lc.ZoomTauHead = append(lc.ZoomTauHead, float64(h))
		}
		bs := &boundSpan{tau: lc.zoomTaus(len(scores)), rel: c.rel, gate: c.gate}
		if got := bs.thresholds(scores); !slices.Equal(got, c.want) {
			t.Errorf("tau %v (per group %v), rel %v, gate %v: %v, want %v", c.tau, c.head, c.rel, c.gate, got, c.want)
		}
	}
}

func TestStreamTokens(t *testing.T) {
	n := 64
	h := make([]float32, n)
	h[0] = float32(math.NaN())
	for i := 1; i < n; i++ {
		h[i] = float32(i % 7) // highest (6) at 6, 13, 20, 27, ...
	}
	if got, want := streamTokens(h, 20, 0), windowTokens(n, 20); !slices.Equal(got, want) {
		t.Fatalf("top 0: %v, want the window %v", got, want)
	}
	w := 20
	got := streamTokens(h, w, 0.5)
	k := (w - sinks) / 2
	win := windowTokens(n, w-k)
	if len(got) != w || !slices.IsSorted(got) {
		t.Fatalf("top 0.5: %d rows %v, want %d sorted", len(got), got, w)
	}
	var extra []int
	for _, tok := range got {
		if !slices.Contains(win, tok) {
			extra = append(extra, tok)
		}
	}
	if len(extra) != k {
		t.Fatalf("top 0.5: %d rows beyond the %d-row window %v, want %d: %v", len(extra), w-k, win, k, got)
	}
	for _, tok := range extra {
		if h[tok] != 6 {
			t.Errorf("top 0.5: row %d of surprisal %v, want one of the highest (6): %v", tok, h[tok], got)
		}
	}
	if got := streamTokens(h, w, 1); len(got) != w || !slices.Equal(got[:sinks], allTokens(sinks)) {
		t.Errorf("top 1: %v, want %d rows, the sinks first", got, w)
	}
}

// TestHeadSplitRanked: span+heads+oracle and span+heads+router zoom by
// their rankers, the teacher's attention mass and the memory's SeKV
// routers. At relative 1 a retrieval head zooms exactly the span of the
// highest score (nothing where it does not fit the layer's zoom), and
// somewhere a different zoom than the anchors' attention gives; below a
// gate the threshold is off and the zoom fills; the routers' keys are
// counted in the retrieval heads' rows; the budget holds; LongConfig
// measures the oracle only with Oracle, the trained routers only with
// Routers.
func TestHeadSplitRanked(t *testing.T) {
	m, ctx, res, h := needlePrefill(t)
	s, cfg, retrieval := headStore(t, m, res, h)
	n, b := len(ctx), len(ctx)/4
	// rankers are a ranker for the memory and one for the check: the
	// teacher keeps each step's keys, so each needs its own.
	type rankers func(bs *boundSpan) (spanRanker, spanRanker)
	teachers := func(*boundSpan) (spanRanker, spanRanker) {
		return newTeacher(m, res.Cache, s.meta), newTeacher(m, res.Cache, s.meta)
	}
	routers := func(*boundSpan) (spanRanker, spanRanker) { r := routerRank{s.rt, s.hd}; return r, r }
	// A fitted ranker that prefers recent spans, built as the method builds it.
	fit := &RankFit{W: make([][]float64, len(retrieval))}
	for gi, r := range retrieval {
		if r {
			fit.W[gi] = []float64{0, 0.1, 0, -1, 0, 0, 0, 0, 0}
		}
	}
	fits := func(bs *boundSpan) (spanRanker, spanRanker) {
		r, err := (&LongConfig{Model: m, Retrieval: retrieval, RankFit: fit}).fitRanker(bs, res.Cache)
		if err != nil {
			t.Fatal(err)
		}
		return r, r
	}
	keys := float64(s.rt.Dim) / float64(2*s.hd)
	run := func(name string, rk rankers, keys, gate float64) (zoomed []int, hs *headSplit) {
		hs, err := newHeadSplit(s, h, res.Cache, b, &LongConfig{Span: cfg, StreamShare: 0.5, Retrieval: retrieval, ZoomRel: 1, ZoomGate: gate}, keys)
		if err != nil {
			t.Fatal(err)
		}
		var ref spanRanker
		if rk != nil {
			hs.bs.rank, ref = rk(hs.bs)
		}
		anchors := len(hs.bs.resIdx)
		check := &stepSeen{inner: hs, each: func(a *llama.StepAttention, sets []rowSet) {
			var score [][]float64
			if ref != nil {
				var err error
				if score, err = ref.rank(a, hs.bs.scores(a)); err != nil {
					t.Fatal(err)
				}
			}
			for g, rs := range sets {
				if !retrieval[a.Layer*m.KVHeads+g] {
					continue
				}
				z := len(rs.k)/s.hd - anchors
				zoomed = append(zoomed, z)
				if score == nil || gate > 0 {
					continue
				}
				best := -1
				for sp, v := range score[g] {
					if hs.bs.rt.SpanTokens[sp] > 0 && !math.IsNaN(v) && (best < 0 || v > score[g][best]) {
						best = sp
					}
				}
				want := 0
				if best >= 0 && int64(hs.bs.rt.SpanTokens[best]) <= hs.bs.layerZoom[a.Layer] {
					want = hs.bs.rt.SpanTokens[best]
				}
				if z != want {
					t.Fatalf("%s: layer %d, KV head %d, position %d: %d rows zoomed, want %d (span %d)", name, a.Layer, g, a.Pos, z, want, best)
				}
			}
		}}
		if _, err := decode(m, check, ctx[n-16:], n); err != nil {
			t.Fatal(err)
		}
		if hs.maxRows > float64(b) {
			t.Errorf("%s: %.1f rows per head, budget %d", name, hs.maxRows, b)
		}
		return zoomed, hs
	}
	byAnchors, plain := run("anchors", nil, 0, 0)
	for _, c := range []struct {
		name string
		rk   rankers
		keys float64
	}{{MethodSpanHeadsOracle, teachers, 0}, {MethodSpanHeadsRouter, routers, keys}, {MethodSpanHeadsFit, fits, rankMeanCost}} {
		ranked, hs := run(c.name, c.rk, c.keys, 0)
		if slices.Equal(ranked, byAnchors) {
			t.Errorf("%s: its zoom equals the anchors' at every step: %v", c.name, ranked)
		}
		// Below a gate no query reaches, the zoom fills the budget in
		// place of zooming the best span alone.
		var one, filled int
		gated, _ := run(c.name, c.rk, c.keys, 0.999)
		for i, z := range gated {
			one, filled = one+ranked[i], filled+z
		}
		if filled <= one {
			t.Errorf("%s, gate 0.999: %d rows zoomed in all, no more than the %d of the best spans alone", c.name, filled, one)
		}
		if want := plain.bs.fixedRows + c.keys*float64(hs.bs.bounded); math.Abs(hs.bs.fixedRows-want) > 1e-9 || c.keys > 0 && hs.bs.zoom >= plain.bs.zoom {
			t.Errorf("%s: %.2f fixed rows, want %.2f; zoom %d rows, the anchors' alone %d", c.name, hs.bs.fixedRows, want, hs.bs.zoom, plain.bs.zoom)
		}
	}
	lc := LongConfig{Retrieval: retrieval}
	if got := lc.methods(); slices.Contains(got, MethodSpanHeadsOracle) || slices.Contains(got, MethodSpanHeadsTrained) || !slices.Contains(got, MethodSpanHeadsRouter) {
		t.Errorf("without Oracle and Routers: %q", got)
	}
	lc.Oracle, lc.Routers = true, []router.Artifact{{}}
	if got := lc.methods(); !slices.Contains(got, MethodSpanHeadsOracle) || !slices.Contains(got, MethodSpanHeadsTrained) || slices.Contains(got, MethodSpanHeadsFit) {
		t.Errorf("with Oracle and Routers: %q", got)
	}
	lc.RankFit = fit
	if got := lc.methods(); !slices.Contains(got, MethodSpanHeadsFit) {
		t.Errorf("with RankFit: %q", got)
	}
	// A fit for other heads than the model's is refused.
	lc = LongConfig{Model: m, Retrieval: retrieval, Span: cfg, RankFit: &RankFit{}}
	if _, err := lc.headMethod(MethodSpanHeadsFit, s, h, res.Cache, b, nil); !errors.Is(err, format.ErrInvalidArgument) {
		t.Errorf("a fit of no heads: %v, want ErrInvalidArgument", err)
	}
}

// stepSeen hands each step's attention and row sets of inner to each
// before returning them.
type stepSeen struct {
	inner method
	each  func(a *llama.StepAttention, sets []rowSet)
}

func (c *stepSeen) rows(a *llama.StepAttention) ([]rowSet, error) {
	sets, err := c.inner.rows(a)
	if err == nil {
		c.each(a, sets)
	}
	return sets, err
}

// TestHeadSplitRankWithin: with RankWithin a ranker orders only the spans
// whose anchor score passes the thresholds. At relative 1 that is the
// anchors' best span alone, so the routers' zoom is the anchors' at every
// step (and not without RankWithin); at tau 0.02 a retrieval head zooms
// no more rows than the spans passing it hold, and somewhere zooms; a
// head's own tau (ZoomTauHead) of 1 keeps the routers from zooming it.
func TestHeadSplitRankWithin(t *testing.T) {
	m, ctx, res, h := needlePrefill(t)
	s, cfg, retrieval := headStore(t, m, res, h)
	n, b := len(ctx), len(ctx)/4
	keys := float64(s.rt.Dim) / float64(2*s.hd)
	run := func(ranked, within bool, tau, rel float64, head []float64) (zoomed []int) {
		lc := &LongConfig{Span: cfg, StreamShare: 0.5, Retrieval: retrieval, ZoomTau: tau, ZoomRel: rel, RankWithin: within, ZoomTauHead: head}
		k := 0.0
		if ranked {
			k = keys
		}
		hs, err := newHeadSplit(s, h, res.Cache, b, lc, k)
		if err != nil {
			t.Fatal(err)
		}
		if ranked {
			hs.bs.rank = routerRank{s.rt, s.hd}
		}
		anchors := len(hs.bs.resIdx)
		check := &stepSeen{inner: hs, each: func(a *llama.StepAttention, sets []rowSet) {
			scores := hs.bs.scores(a)
			for g, rs := range sets {
				gi := a.Layer*m.KVHeads + g
				if !retrieval[gi] {
					continue
				}
				z := len(rs.k)/s.hd - anchors
				zoomed = append(zoomed, z)
				if tau == 0 {
					continue
				}
				passing := 0
				for sp, v := range scores[gi] {
					if v > float32(tau) {
						passing += hs.bs.rt.SpanTokens[sp]
					}
				}
				if z > passing {
					t.Fatalf("ranked %v, within %v, tau %v: layer %d, position %d: %d rows zoomed, the spans passing tau hold %d", ranked, within, tau, a.Layer, a.Pos, z, passing)
				}
			}
		}}
		if _, err := decode(m, check, ctx[n-16:], n); err != nil {
			t.Fatal(err)
		}
		if hs.maxRows > float64(b) {
			t.Errorf("ranked %v, within %v: %.1f rows per head, budget %d", ranked, within, hs.maxRows, b)
		}
		return zoomed
	}
	anchors := run(false, false, 0, 1, nil)
	if got := run(true, true, 0, 1, nil); !slices.Equal(got, anchors) {
		t.Errorf("relative 1 within the anchors' threshold: routers zoom %v rows, want the anchors' %v", got, anchors)
	}
	if got := run(true, false, 0, 1, nil); slices.Equal(got, anchors) {
		t.Errorf("relative 1, routers over every span: the anchors' zoom at every step (%v): the check cannot tell", got)
	}
	total := 0
	for _, z := range run(true, true, 0.02, 0, nil) {
		total += z
	}
	if total == 0 {
		t.Error("tau 0.02 within the anchors' threshold: nothing zoomed")
	}
	// A retrieval head's own tau applies to the routers' scores too: at 1
	// (no score passes) it zooms nothing, where tau 0.02 zooms.
	off := make([]float64, len(retrieval))
	for gi, r := range retrieval {
		if r {
			off[gi] = 1
		}
	}
	if got := run(true, false, 0.02, 0, off); slices.Max(got) != 0 {
		t.Errorf("routers, every retrieval head at tau 1: %v rows zoomed, want none", got)
	}
}
