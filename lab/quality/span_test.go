package quality

import (
	"math"
	"slices"
	"testing"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/lab/llama"
	"github.com/kvstore/kvstore/reconstruct"
	"github.com/kvstore/kvstore/segment"
)

// tinyPrefill is tinyRandom's prefill of n tokens of a fixed sequence and
// their surprisals.
func tinyPrefill(t *testing.T, n int) (*llama.Model, *llama.Result, []float32) {
	t.Helper()
	m := tinyRandom(t)
	ctx := make([]int, n)
	for i := range ctx {
		ctx[i] = (i*37 + i*i) % m.Vocab
	}
	res, err := m.Forward(ctx, 0, nil, llama.ForwardOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return m, res, surprisal(res, n)
}

// TestSpanStoreRowDType: a span memory built for a bf16 spec
// (Config.RowDType) reads back its resident rows as the prefill's rounded
// to bf16, and an f32 one as they were; the bf16 memory is the smaller.
func TestSpanStoreRowDType(t *testing.T) {
	n := 160
	m, res, h := tinyPrefill(t, n)
	hd := m.HeadDim()
	sizes := map[format.DType]int64{}
	for _, tc := range []struct {
		dt  format.DType
		tol float64 // relative, of a row value
	}{{format.DTypeF32, 1e-6}, {format.DTypeBF16, 1.0 / 256}} {
		cfg := Config{Model: m, Context: 2 * sinks, Continuation: 1, Name: "rowdtype", RowDType: tc.dt,
			Segment: segment.Options{MinSpan: 16, MaxSpan: 40}}
		cfg.ensureDefaults()
		s, err := newSpanStore(m, res.Cache, h, &cfg)
		if err != nil {
			t.Fatalf("%v: %v", tc.dt, err)
		}
		if got := s.meta.ResidentDType; got != tc.dt {
			t.Errorf("%v: memory's resident dtype %v", tc.dt, got)
		}
		nr := len(s.meta.Resident)
		if nr == 0 {
			t.Fatalf("%v: no resident row", tc.dt)
		}
		rounded := 0
		for l, kv := range res.Cache.Layers {
			for g := range m.KVHeads {
				for i, tok := range s.meta.Resident {
					for j := range hd {
						for _, p := range []struct {
							got, want float32
						}{{s.resK[l][(g*nr+i)*hd+j], kv.K[(g*n+tok)*hd+j]}, {s.resV[l][(g*nr+i)*hd+j], kv.V[(g*n+tok)*hd+j]}} {
							d := math.Abs(float64(p.got - p.want))
							if d > tc.tol*math.Abs(float64(p.want))+1e-6 {
								t.Fatalf("%v: layer %d head %d token %d [%d]: %v, prefill %v", tc.dt, l, g, tok, j, p.got, p.want)
							}
							if d > 0 {
								rounded++
							}
							if tc.dt == format.DTypeBF16 && format.BF16ToF32(format.F32ToBF16(p.got)) != p.got {
								t.Fatalf("%v: token %d [%d]: %v is not a bf16", tc.dt, tok, j, p.got)
							}
						}
					}
				}
			}
		}
		if tc.dt == format.DTypeBF16 && rounded == 0 {
			t.Errorf("bf16: no resident value rounded")
		}
		sizes[tc.dt] = s.size.Stored()
		s.close()
	}
	if !(sizes[format.DTypeBF16] < sizes[format.DTypeF32]) {
		t.Errorf("stored bytes: bf16 %d, f32 %d", sizes[format.DTypeBF16], sizes[format.DTypeF32])
	}
}

// TestRawZoom: with the store's size rule (Config.SizeRule) a span left
// unfactored is off the GPU like a factored one: only the kept anchors are
// resident, so span memory fits a budget the unfactored rows alone would
// pass, and a zoom into such a span moves its stored rows exact.
func TestRawZoom(t *testing.T) {
	m, ctx, res, h := needlePrefill(t)
	n := len(ctx)
	cfg := Config{Model: m, Context: 2 * sinks, Continuation: 1, Name: "rawzoom", SizeRule: true}
	cfg.ensureDefaults()
	s, err := newSpanStore(m, res.Cache, h, &cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	if !s.rawZoom {
		t.Fatal("size rule without raw zoom")
	}
	b := n / 10
	sm := newSpanMethod(s, h, b, cfg.AnchorShare, false)
	if sm.over || sm.fixedRows > float64(b) {
		t.Errorf("raw zoom at %d rows: %v resident, over %v", b, sm.fixedRows, sm.over)
	}
	s.rawZoom = false
	gpu := newSpanMethod(s, h, b, cfg.AnchorShare, false)
	s.rawZoom = true
	meta := s.meta
	raw := 0
	for sp, info := range meta.Spans {
		if info.Factored || sm.rt.SpanTokens[sp] == 0 {
			continue
		}
		raw++
		if gpu.rt.SpanTokens[sp] != 0 {
			t.Errorf("span %d unfactored: %d rows to zoom without raw zoom", sp, gpu.rt.SpanTokens[sp])
		}
		checkRawRows(t, s, res.Cache, sp)
	}
	if raw == 0 {
		t.Fatalf("no unfactored span with rows to zoom among %d spans: the test needs one", len(meta.Spans))
	}
	if !(gpu.fixedRows > sm.fixedRows) {
		t.Errorf("resident rows: %v with unfactored spans on the GPU, %v with raw zoom", gpu.fixedRows, sm.fixedRows)
	}
	t.Logf("%d tokens, %d spans (%d unfactored with rows to zoom), budget %d: resident %v with raw zoom, %v without",
		n, len(meta.Spans), raw, b, sm.fixedRows, gpu.fixedRows)
}

// TestRouteRaw: with Config.RouteRaw and the size rule, SeKV's routers
// score the spans left unfactored by their summary keys, where the
// store's routing scores them NaN, and a zoom with room for every span
// moves unfactored ones too; without the size rule RouteRaw does nothing.
func TestRouteRaw(t *testing.T) {
	m, ctx, res, h := needlePrefill(t)
	n := len(ctx)
	cfg := Config{Model: m, Context: 2 * sinks, Continuation: 1, Name: "routeraw", SizeRule: true, RouteRaw: true}
	cfg.ensureDefaults()
	s, err := newSpanStore(m, res.Cache, h, &cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	sm := newSpanMethod(s, h, n/10, cfg.AnchorShare, false)
	hd, per := m.HeadDim(), m.Heads/m.KVHeads
	q := make([]float32, per*hd)
	for i := range q {
		q[i] = float32(math.Sin(float64(i)))
	}
	groups := m.Layers * m.KVHeads
	queries := make([][]float32, groups)
	unfactored := 0
	for g := range groups {
		queries[g] = q
		ours, err := sm.rt.Score(g, int64(n), q, nil)
		if err != nil {
			t.Fatal(err)
		}
		theirs, err := s.rt.Score(g, int64(n), q, nil)
		if err != nil {
			t.Fatal(err)
		}
		for sp, info := range s.meta.Spans {
			if info.Factored {
				if ours[sp] != theirs[sp] {
					t.Fatalf("group %d span %d factored: score %v, the store's %v", g, sp, ours[sp], theirs[sp])
				}
				continue
			}
			unfactored++
			if math.IsNaN(float64(ours[sp])) || !math.IsNaN(float64(theirs[sp])) {
				t.Fatalf("group %d span %d unfactored: score %v, the store's %v", g, sp, ours[sp], theirs[sp])
			}
		}
	}
	if unfactored == 0 {
		t.Fatalf("no unfactored span among %d: the test needs one", len(s.meta.Spans))
	}
	z, err := sm.rt.Zoom(int64(n), queries, reconstruct.Budget{Tokens: int64(n) * int64(m.KVHeads), Fill: true})
	if err != nil {
		t.Fatal(err)
	}
	zoomed := 0
	for _, sps := range z.Spans {
		for _, sp := range sps {
			if !s.meta.Spans[sp].Factored {
				zoomed++
			}
		}
	}
	if zoomed == 0 {
		t.Error("no unfactored span zoomed with room for every span")
	}
	cfg.SizeRule = false
	off, err := newSpanStore(m, res.Cache, h, &cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer off.close()
	if off.routeRaw || off.routing(off.rt) != off.rt {
		t.Error("RouteRaw without the size rule changed the routing")
	}
}

// TestRawSpans: with Config.RawSpans the spans left unfactored keep the
// segmentation's cut: the memory has more spans than with each run of them
// merged, its longest unfactored span is no longer, it is still within its
// raw rows (the store's rule, in the spec's dtype), and a zoom into each
// unfactored span moves its rows exact.
func TestRawSpans(t *testing.T) {
	m, ctx, res, h := needlePrefill(t)
	n := len(ctx)
	build := func(raw bool) *spanStore {
		cfg := Config{Model: m, Context: 2 * sinks, Continuation: 1, Name: "rawspans", SizeRule: true, RawSpans: raw}
		cfg.ensureDefaults()
		s, err := newSpanStore(m, res.Cache, h, &cfg)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	longest := func(s *spanStore) (most, unfactored int) {
		for _, info := range s.meta.Spans {
			if !info.Factored {
				most, unfactored = max(most, info.Len()), unfactored+1
			}
		}
		return most, unfactored
	}
	merged, kept := build(false), build(true)
	defer merged.close()
	defer kept.close()
	mm, mu := longest(merged)
	km, ku := longest(kept)
	t.Logf("%d tokens: merged %d spans (%d unfactored, longest %d), kept %d (%d, %d); stored %d and %d bytes of %d raw (f32 spec)",
		n, len(merged.meta.Spans), mu, mm, len(kept.meta.Spans), ku, km, merged.size.Stored(), kept.size.Stored(), kept.size.Raw)
	if len(kept.meta.Spans) <= len(merged.meta.Spans) || ku <= mu || km > mm {
		t.Errorf("RawSpans: %d spans (%d unfactored, longest %d), merged %d (%d, longest %d)", len(kept.meta.Spans), ku, km, len(merged.meta.Spans), mu, mm)
	}
	if kept.size.Stored() > kept.size.Raw {
		t.Errorf("RawSpans: %d bytes stored, more than the raw rows' %d", kept.size.Stored(), kept.size.Raw)
	}
	for sp, info := range kept.meta.Spans {
		if !info.Factored {
			checkRawRows(t, kept, res.Cache, sp)
		}
	}
}

// checkRawRows checks that a zoom into unfactored span sp of s moves the
// prefill's rows of c exact, in every layer and KV head.
func checkRawRows(t *testing.T, s *spanStore, c *llama.Cache, sp int) {
	t.Helper()
	info, n, hd := s.meta.Spans[sp], c.Len(), s.hd
	for l, kv := range c.Layers {
		for g := range c.KVHeads {
			rs, err := s.span(l, g, sp)
			if err != nil {
				t.Fatal(err)
			}
			for tok := info.Start; tok < info.End; tok++ {
				i, j := (tok-info.Start)*hd, (g*n+tok)*hd
				if !slices.Equal(rs.k[i:i+hd], kv.K[j:j+hd]) || !slices.Equal(rs.v[i:i+hd], kv.V[j:j+hd]) {
					t.Fatalf("span %d layer %d head %d token %d: zoomed row is not the prefill's", sp, l, g, tok)
				}
			}
		}
	}
}

// TestMemoryRows: span+heads' streaming heads read their rows from the
// stored memory (spanStore.keepRows), not from the prefill: a resident row
// as stored, a row of a factored span as its factors give it. With
// Config.ResidentTail every row of the window is the prefill's exact, and
// the memory stays within its raw rows.
func TestMemoryRows(t *testing.T) {
	m, ctx, res, h := needlePrefill(t)
	n, hd := len(ctx), res.Cache.HeadDim
	build := func(tail float64) *spanStore {
		cfg := Config{Model: m, Context: 2 * sinks, Continuation: 1, Name: "memrows", SizeRule: true, RawSpans: true, ResidentTail: tail}
		cfg.ensureDefaults()
		if err := cfg.validate(); err != nil {
			t.Fatal(err)
		}
		s, err := newSpanStore(m, res.Cache, h, &cfg)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	window := windowTokens(n, n/4)
	same := func(f *fixedRows, l, g, i, tok int) bool {
		j := (g*n + tok) * hd
		kv := res.Cache.Layers[l]
		return slices.Equal(f.sets[l][g].k[i*hd:(i+1)*hd], kv.K[j:j+hd]) && slices.Equal(f.sets[l][g].v[i*hd:(i+1)*hd], kv.V[j:j+hd])
	}
	plain := build(0)
	defer plain.close()
	f, err := plain.keepRows(window)
	if err != nil {
		t.Fatal(err)
	}
	lossy := 0
	for l := range res.Cache.Layers {
		for g := range res.Cache.KVHeads {
			for i, tok := range window {
				if _, ok := plain.resAt[tok]; ok {
					if !same(f, l, g, i, tok) {
						t.Fatalf("layer %d head %d token %d: resident row is not the stored one", l, g, tok)
					}
					continue
				}
				sp := spanOf(plain.meta, tok)
				rs, err := plain.span(l, g, sp)
				if err != nil {
					t.Fatal(err)
				}
				k := (tok - plain.meta.Spans[sp].Start) * hd
				if !slices.Equal(f.sets[l][g].k[i*hd:(i+1)*hd], rs.k[k:k+hd]) || !slices.Equal(f.sets[l][g].v[i*hd:(i+1)*hd], rs.v[k:k+hd]) {
					t.Fatalf("layer %d head %d token %d: row is not its span's reconstruction", l, g, tok)
				}
				if !same(f, l, g, i, tok) {
					lossy++
				}
			}
		}
	}
	if lossy == 0 {
		t.Fatalf("no row of the last %d tokens differs from the prefill: the test needs a factored one", len(window))
	}
	tailed := build(0.25)
	defer tailed.close()
	if f, err = tailed.keepRows(window); err != nil {
		t.Fatal(err)
	}
	for l := range res.Cache.Layers {
		for g := range res.Cache.KVHeads {
			for i, tok := range window {
				if !same(f, l, g, i, tok) {
					t.Fatalf("resident tail: layer %d head %d token %d is not the prefill's row", l, g, tok)
				}
			}
		}
	}
	if tailed.size.Stored() > tailed.size.Raw {
		t.Errorf("resident tail: %d bytes stored, more than the raw rows' %d", tailed.size.Stored(), tailed.size.Raw)
	}
	t.Logf("%d tokens, window %d: %d rows reconstructed without a tail; stored %d and %d bytes of %d raw",
		n, len(window), lossy, plain.size.Stored(), tailed.size.Stored(), tailed.size.Raw)
}

// TestHeadRank: Config.HeadRank is stored as the model's rank artifact, so
// a head given rank 1 keeps one component per factored span and a head
// given 0 keeps the components Energy chooses, more on some span; the
// memory is smaller than without it.
func TestHeadRank(t *testing.T) {
	m, _, res, h := needlePrefill(t)
	groups := m.Layers * m.KVHeads
	build := func(rank []float32) *spanStore {
		cfg := Config{Model: m, Context: 2 * sinks, Continuation: 1, Name: "headrank", SizeRule: true, RawSpans: true, HeadRank: rank}
		cfg.ensureDefaults()
		s, err := newSpanStore(m, res.Cache, h, &cfg)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	rank := make([]float32, groups)
	for gi := range rank {
		rank[gi] = 1
	}
	rank[groups-1] = 0 // chosen by energy
	s, all := build(rank), build(nil)
	defer s.close()
	defer all.close()
	most, factored := 0, 0
	for sp, info := range s.meta.Spans {
		if !info.Factored {
			continue
		}
		factored++
		for gi := range groups {
			for _, kind := range []format.ChunkKind{format.ChunkK, format.ChunkV} {
				f, err := s.r.Factors(gi/m.KVHeads, gi%m.KVHeads, sp, kind)
				if err != nil {
					t.Fatal(err)
				}
				if gi < groups-1 && f.Rank != 1 {
					t.Fatalf("span %d head %d: rank %d, the artifact says 1", sp, gi, f.Rank)
				}
				if gi == groups-1 {
					most = max(most, f.Rank)
				}
			}
		}
	}
	if factored == 0 || most <= 1 {
		t.Fatalf("%d factored spans, the energy's head keeps at most rank %d: the test needs more", factored, most)
	}
	if s.size.Stored() >= all.size.Stored() {
		t.Errorf("rank 1 on %d of %d heads: %d bytes stored, not fewer than every head by energy's %d", groups-1, groups, s.size.Stored(), all.size.Stored())
	}
	t.Logf("%d factored spans; the energy's head up to rank %d; stored %d bytes against %d", factored, most, s.size.Stored(), all.size.Stored())
}
