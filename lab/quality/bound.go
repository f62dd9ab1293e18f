package quality

import (
	"cmp"
	"math"
	"slices"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/lab/llama"
	"github.com/kvstore/kvstore/reconstruct"
	"github.com/kvstore/kvstore/store"
)

// Span memory routed by per-channel key bounds (Quest's page bounds, per
// span): for each factored span and (layer, KV head), the channel-wise
// minimum and maximum of the span's keys not resident, post-RoPE at their
// positions, taken from the rows its factors rebuild. For a post-RoPE
// query q, sum_j max(q_j lo_j, q_j hi_j) is at least q . k for every such
// key k: an upper bound on the span's largest logit.
const (
	MethodSpanBound = "span+bound"
	// MethodSpanBoundWindow is span+bound with the context's last rows
	// resident, WindowShare of the budget, as span+trained+window.
	MethodSpanBoundWindow = "span+bound+window"
	// MethodSpanMeanKey and MethodSpanMeanKeyWindow route by each span's
	// mean key post-RoPE (its rows' keys at their positions, averaged) in
	// place of the bounds: half a row (HeadDim floats) per span.
	MethodSpanMeanKey       = "span+meankey"
	MethodSpanMeanKeyWindow = "span+meankey+window"
	// MethodSpanBoundCh keeps each span's bounds on LongConfig's
	// BoundChannels channels per (layer, KV head) (boundSpan.narrow):
	// BoundChannels/HeadDim of a row per span and one row per (layer, KV
	// head). MethodSpanBoundChWindow adds the recent window.
	MethodSpanBoundCh       = "span+bound-ch"
	MethodSpanBoundChWindow = "span+bound-ch+window"
	// MethodSpanAnchor routes by the attention the query puts on the
	// resident anchors each span holds or follows (the anchor just before
	// its first row): no row beyond the anchors the memory keeps anyway.
	// MethodSpanAnchorWindow adds the recent window; MethodSpanAnchorBoundCh
	// takes, per span, the larger of its anchors' attention and its
	// span+bound-ch estimate.
	MethodSpanAnchor        = "span+anchor"
	MethodSpanAnchorWindow  = "span+anchor+window"
	MethodSpanAnchorBoundCh = "span+anchor+bound-ch"
)

// boundSpan is span memory zoomed by key bounds in place of a router's
// scores. Each span's bounds cost one K+V row (2*HeadDim floats) per
// (layer, KV head), counted in the budget's fixed rows; on C channels
// C/HeadDim of a row and one row per (layer, KV head); in mean mode its
// mean key post-RoPE, half a row (boundMode.cost).
type boundSpan struct {
	*spanMethod
	// lo and hi are per group (layer*KVHeads+head) and span the bounds,
	// HeadDim floats each; nil for a span with no row to zoom.
	lo, hi [][][]float32
	// mean, in mean mode (lo and hi nil), is per group and span the mean
	// key, nil for a span with no row to zoom.
	mean    [][][]float32
	bounded int // spans with rows to zoom (the same in every group)
	mode    boundMode
	// near is, per resident row (an index into resIdx), the spans whose
	// score its attention raises in an anchor mode: the factored span it
	// lies in and the one it ends before, -1 where none.
	near [][2]int
	win  *windowed // the recent window, or nil
	// layerZoom, when set, is each layer's zoom rows in place of
	// spanMethod.zoom: MethodSpanHeads zooms its retrieval heads only
	// (spanMethod.heads).
	layerZoom []int64
	// tau, when set, is per group the score a span must pass to be zoomed
	// where above 0 (LongConfig.zoomTaus): the zoom may then hold fewer
	// rows than its budget.
	tau []float32
	// rel, when above 0, is the share of a group's highest score a span
	// must pass to be zoomed.
	rel float32
	// gate, when above 0, is the best score a group's spans must reach at
	// a step for tau and rel to apply to it.
	gate float32
	// within, with rank, has the ranker order only the spans whose anchor
	// score passes the thresholds (tau, rel, gate), the budget alone
	// capping those.
	within bool
	// rank, when set, scores the spans in place of the anchors' attention
	// (below gate only, when set): the teacher's attention mass
	// (MethodSpanHeadsOracle) or a SeKV router's (MethodSpanHeadsRouter,
	// MethodSpanHeadsTrained).
	rank spanRanker
	// est, when set (MethodSpanHeadsFit, anchors only), is filled by
	// scores at every step with more estimates of each span's attention
	// from the same resident logits.
	est *spanEstimates
	// check, when set, is told at every scoring of each bounded span the
	// bound and the largest true logit (q . k, unscaled) of its rows.
	check func(bound, logit float64)
}

// newBoundSpan is span memory at b rows zoomed by key bounds; w > 0 keeps
// the context's last rows resident (MethodSpanBoundWindow), w of them or
// fewer where the anchors and bounds leave less room.
func newBoundSpan(s *spanStore, h []float32, b int, share float64, w int, mode boundMode) (*boundSpan, error) {
	sm := newSpanMethod(s, h, b, share, false)
	bs := &boundSpan{spanMethod: sm, mode: mode}
	mean := mode.mean
	cost, fixed := mode.cost(s.hd)
	if w > 0 {
		// The window takes at most the rows the anchors and the bounds
		// leave (a window only removes bounds, of the spans it covers).
		spans := 0
		for _, n := range sm.rt.SpanTokens {
			if n > 0 {
				spans++
			}
		}
		w = min(w, max(0, b-int(math.Ceil(sm.fixedRows+fixed+cost*float64(spans)))))
		var err error
		if bs.win, err = newWindowed(sm, w, b); err != nil {
			return nil, err
		}
	}
	meta := s.meta
	groups := meta.Layers * meta.KVHeads
	bs.lo, bs.hi, bs.mean = make([][][]float32, groups), make([][][]float32, groups), make([][][]float32, groups)
	for gi := range groups {
		bs.lo[gi], bs.hi[gi], bs.mean[gi] = make([][]float32, len(meta.Spans)), make([][]float32, len(meta.Spans)), make([][]float32, len(meta.Spans))
		for sp, info := range meta.Spans {
			if !s.zoomable(sp) || sm.rt.SpanTokens[sp] == 0 || mode.anchorsOnly {
				continue
			}
			lo, hi, mk, err := sm.keyStats(gi, sp, info)
			if err != nil {
				return nil, err
			}
			if !mean {
				bs.lo[gi][sp], bs.hi[gi][sp] = lo, hi
				continue
			}
			bs.mean[gi][sp] = mk
		}
	}
	for _, n := range sm.rt.SpanTokens {
		if n > 0 {
			bs.bounded++
		}
	}
	if mode.channels > 0 {
		bs.narrow(mode.channels)
	}
	if mode.anchors || mode.anchorsOnly {
		bs.nearSpans()
	}
	sm.fixedRows += fixed + cost*float64(bs.bounded)
	left := float64(b) - sm.fixedRows
	sm.over, sm.zoom = left < 0, 0
	if left >= 1 {
		sm.zoom = int64(math.Floor(left)) * int64(meta.KVHeads)
	}
	return bs, nil
}

// boundMode is what a boundSpan routes by: the bounds on every channel,
// on the channels of the most gain (channels > 0, the others bounded by
// the (layer, KV head)'s box over every span), or the mean key.
type boundMode struct {
	mean     bool
	channels int
	// anchors adds each span's anchors' attention to its score;
	// anchorsOnly scores by it alone (no bounds), at keys rows per span
	// (a router's projected summary keys, where one ranks the spans).
	anchors, anchorsOnly bool
	keys                 float64
}

// keyStats are the channel-wise minimum, maximum and mean of the keys of
// span sp's rows not resident in group gi (layer*KVHeads+head), post-RoPE
// at their positions, from the rows its factors rebuild.
func (sm *spanMethod) keyStats(gi, sp int, info format.Span) (lo, hi, mean []float32, err error) {
	s := sm.s
	hd := s.hd
	rec, err := s.span(gi/s.meta.KVHeads, gi%s.meta.KVHeads, sp)
	if err != nil {
		return nil, nil, nil, err
	}
	lo, hi, mk := make([]float32, hd), make([]float32, hd), make([]float64, hd)
	for j := range hd {
		lo[j], hi[j] = float32(math.Inf(1)), float32(math.Inf(-1))
	}
	for t := info.Start; t < info.End; t++ {
		if sm.resident[t] {
			continue
		}
		for j, v := range rec.k[(t-info.Start)*hd : (t-info.Start+1)*hd] {
			lo[j], hi[j] = min(lo[j], v), max(hi[j], v)
			mk[j] += float64(v)
		}
	}
	mean = make([]float32, hd)
	for j, v := range mk {
		mean[j] = float32(v / float64(sm.rt.SpanTokens[sp]))
	}
	return lo, hi, mean, nil
}

// cost is the rows a mode costs per span and once per (layer, KV head).
func (m boundMode) cost(hd int) (perSpan, fixed float64) {
	switch {
	case m.anchorsOnly:
		return m.keys, 0
	case m.mean:
		return 0.5, 0
	case m.channels > 0 && m.channels < hd:
		return float64(m.channels) / float64(hd), 1
	}
	return 1, 0
}

// narrow keeps, per (layer, KV head), the spans' own bounds on the c
// channels where they are tightest against the head's box over every
// span (the largest sum over spans of the box's width less the span's),
// and the box's on the others: still an upper bound, on c channels' worth
// of rows per span and one box.
func (bs *boundSpan) narrow(c int) {
	hd := bs.s.hd
	if c >= hd {
		return
	}
	for gi := range bs.lo {
		glo, ghi := make([]float32, hd), make([]float32, hd)
		for j := range hd {
			glo[j], ghi[j] = float32(math.Inf(1)), float32(math.Inf(-1))
		}
		for sp, lo := range bs.lo[gi] {
			if lo == nil {
				continue
			}
			for j := range hd {
				glo[j], ghi[j] = min(glo[j], lo[j]), max(ghi[j], bs.hi[gi][sp][j])
			}
		}
		gain := make([]float64, hd)
		for sp, lo := range bs.lo[gi] {
			if lo == nil {
				continue
			}
			for j := range hd {
				gain[j] += float64(ghi[j]-glo[j]) - float64(bs.hi[gi][sp][j]-lo[j])
			}
		}
		order := make([]int, hd)
		for j := range order {
			order[j] = j
		}
		slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(gain[b], gain[a]) })
		for _, j := range order[c:] {
			for sp, lo := range bs.lo[gi] {
				if lo != nil {
					lo[j], bs.hi[gi][sp][j] = glo[j], ghi[j]
				}
			}
		}
	}
}

// keyBound is sum_j max(q_j lo_j, q_j hi_j), in float64.
func keyBound(q, lo, hi []float32) float64 {
	var s float64
	for j, v := range q {
		a, b := float64(v)*float64(lo[j]), float64(v)*float64(hi[j])
		s += max(a, b)
	}
	return s
}

// scores is, per group of a's layer, each span's score: the largest over
// the KV head's query heads of exp(bound/sqrt(hd) - lse), lse the
// log-sum-exp of the head's resident logits and every span's bound (an
// estimate of the span's share of attention from above, comparable across
// the layer's KV heads that share the zoom budget); NaN for spans with no
// bound.
func (bs *boundSpan) scores(a *llama.StepAttention) [][]float32 {
	meta, hd := bs.s.meta, bs.s.hd
	per := len(a.Q) / hd / meta.KVHeads
	scale := 1 / math.Sqrt(float64(hd))
	nr := len(meta.Resident)
	out := make([][]float32, meta.Layers*meta.KVHeads)
	for gi := range out {
		out[gi] = make([]float32, len(meta.Spans))
		for sp := range out[gi] {
			out[gi][sp] = float32(math.NaN())
		}
	}
	bound := make([]float64, len(meta.Spans))
	for g := range meta.KVHeads {
		gi := a.Layer*meta.KVHeads + g
		lo, hi, mk := bs.lo[gi], bs.hi[gi], bs.mean[gi]
		if bs.est != nil {
			bs.est.reset(g)
		}
		for h := g * per; h < (g+1)*per; h++ {
			q := a.Q[h*hd : (h+1)*hd]
			mx := math.Inf(-1)
			var logits []float64
			for _, i := range bs.resIdx {
				l := dot64(q, bs.s.resK[a.Layer][(g*nr+i)*hd:(g*nr+i+1)*hd]) * scale
				logits = append(logits, l)
				mx = max(mx, l)
			}
			for sp := range bound {
				bound[sp] = math.NaN()
				if bs.mode.anchorsOnly {
					continue
				}
				if mk[sp] != nil {
					bound[sp] = dot64(q, mk[sp]) * scale
					mx = max(mx, bound[sp])
					continue
				}
				if lo[sp] == nil {
					continue
				}
				bound[sp] = keyBound(q, lo[sp], hi[sp]) * scale
				mx = max(mx, bound[sp])
				if bs.check != nil {
					bs.check(bound[sp]/scale, bs.trueMax(a.Layer, g, sp, q))
				}
			}
			var z float64
			for _, l := range logits {
				z += math.Exp(l - mx)
			}
			for _, l := range bound {
				if !math.IsNaN(l) {
					z += math.Exp(l - mx)
				}
			}
			if bs.est != nil && bs.mode.anchorsOnly {
				bs.est.add(g, per, logits, mx, z, bs.near, q, mk, scale)
			}
			raise := func(sp int, l float64) {
				p := float32(math.Exp(l-mx) / z)
				if cur := out[gi][sp]; math.IsNaN(float64(cur)) || p > cur {
					out[gi][sp] = p
				}
			}
			for sp, l := range bound {
				if !math.IsNaN(l) {
					raise(sp, l)
				}
			}
			if bs.near != nil {
				for j, l := range logits {
					for _, sp := range bs.near[j] {
						if sp >= 0 {
							raise(sp, l)
						}
					}
				}
			}
		}
	}
	return out
}

// nearSpans sets bs.near: for each resident row, the span with rows to
// zoom it lies in and the one that starts right after it.
func (bs *boundSpan) nearSpans() {
	meta := bs.s.meta
	zoomable := func(sp int) int {
		if sp >= 0 && sp < len(meta.Spans) && bs.rt.SpanTokens[sp] > 0 {
			return sp
		}
		return -1
	}
	bs.near = make([][2]int, len(bs.resIdx))
	for j, i := range bs.resIdx {
		t := meta.Resident[i]
		in, next := spanOf(meta, t), spanOf(meta, t+1)
		bs.near[j] = [2]int{zoomable(in), -1}
		if next != in {
			bs.near[j][1] = zoomable(next)
		}
	}
}

// trueMax is the largest q . k over span sp's rows not resident, from its
// reconstructed keys.
func (bs *boundSpan) trueMax(layer, g, sp int, q []float32) float64 {
	hd, info := bs.s.hd, bs.s.meta.Spans[sp]
	rec, err := bs.s.span(layer, g, sp)
	if err != nil {
		return math.NaN()
	}
	mx := math.Inf(-1)
	for t := info.Start; t < info.End; t++ {
		if !bs.resident[t] {
			mx = max(mx, dot64(q, rec.k[(t-info.Start)*hd:(t-info.Start+1)*hd]))
		}
	}
	return mx
}

func dot64(a, b []float32) float64 {
	var s float64
	for j, v := range a {
		s += float64(v) * float64(b[j])
	}
	return s
}

func (bs *boundSpan) rows(a *llama.StepAttention) ([]rowSet, error) {
	sm := bs.spanMethod
	meta := sm.s.meta
	z := &reconstruct.ZoomSet{Spans: make([][]int, meta.Layers*meta.KVHeads)}
	zoom := sm.zoom
	if bs.layerZoom != nil {
		zoom = bs.layerZoom[a.Layer]
	}
	var scores [][]float32 // the anchors' attention, on the heads that zoom
	if zoom > 0 {
		scores = bs.scores(a)
		for gi, r := range bs.heads {
			if !r {
				for sp := range scores[gi] {
					scores[gi][sp] = float32(math.NaN())
				}
			}
		}
	}
	var ranked [][]float64
	if bs.rank != nil {
		// At every step and layer: the teacher keeps each key.
		var err error
		if ranked, err = bs.rank.rank(a, scores); err != nil {
			return nil, err
		}
	}
	if zoom > 0 {
		tau := bs.thresholds(scores)
		for g, ms := range ranked {
			gi := a.Layer*meta.KVHeads + g
			if bs.gate > 0 && best(scores[gi]) >= bs.gate {
				continue // a copy: the anchors' attention routes it
			}
			for sp, v := range ms {
				// NaN (a span no anchor score reaches) passes no threshold.
				passed := !bs.within || scores[gi][sp] > tau[gi]
				scores[gi][sp] = float32(math.NaN())
				if passed && sm.rt.SpanTokens[sp] > 0 && bs.heads[gi] {
					scores[gi][sp] = float32(v)
				}
			}
			if bs.gate > 0 || bs.within {
				tau[gi] = -1 // below the gate, or among the spans passed, the budget alone caps the zoom
			} else {
				tau[gi] = bs.threshold(gi, scores[gi])
			}
		}
		var err error
		if z, err = reconstruct.Select(scores, tau, sm.rt.SpanTokens, nil,
			reconstruct.Budget{Tokens: zoom, Fill: true}); err != nil {
			return nil, err
		}
	}
	out, err := sm.zoomedRows(a.Layer, a.Pos, z, nil) // no lookahead: the routers do not rank here
	if err != nil || bs.win == nil {
		return out, err
	}
	for g := range out {
		win := bs.win.win.sets[a.Layer][g]
		out[g].k = append(out[g].k, win.k...)
		out[g].v = append(out[g].v, win.v...)
	}
	return out, nil
}

// thresholds is, per group, the score a span must pass to be zoomed
// (threshold).
func (bs *boundSpan) thresholds(scores [][]float32) []float32 {
	tau := make([]float32, len(scores))
	for gi, sc := range scores {
		tau[gi] = bs.threshold(gi, sc)
	}
	return tau
}

// threshold is the score a span of group gi (layer*KVHeads+head) of
// scores must pass to be zoomed: the larger of the group's tau and rel
// times its best score where either is set and the best score reaches
// gate; below every score (-1) elsewhere.
func (bs *boundSpan) threshold(gi int, scores []float32) float32 {
	tau := float32(-1)
	mx := best(scores)
	if mx < bs.gate {
		return tau
	}
	if bs.tau != nil && bs.tau[gi] > 0 {
		tau = bs.tau[gi]
	}
	if bs.rel > 0 {
		// Select zooms scores above tau: at least rel*mx.
		tau = max(tau, math.Nextafter32(bs.rel*mx, float32(math.Inf(-1))))
	}
	return tau
}

// spanRanker scores, per KV head of a step's layer, every span, in place
// of the anchors' attention (anchors: per group, layer*KVHeads+head, the
// spans' anchor scores, nil where the step zooms nothing); a nil result
// leaves the anchors' attention to route.
type spanRanker interface {
	rank(a *llama.StepAttention, anchors [][]float32) ([][]float64, error)
}

func (t *teacher) rank(a *llama.StepAttention, _ [][]float32) ([][]float64, error) {
	return t.mass(a), nil
}

// routerRank scores spans by a SeKV router: store.Routing.Score's alpha
// of the KV head's pre-RoPE queries.
type routerRank struct {
	rt *store.Routing
	hd int
}

func (r routerRank) rank(a *llama.StepAttention, _ [][]float32) ([][]float64, error) {
	kv := r.rt.KVHeads
	per := len(a.QPre) / r.hd / kv
	out := make([][]float64, kv)
	for g := range kv {
		sc, err := r.rt.Score(a.Layer*kv+g, a.Pos, a.QPre[g*per*r.hd:(g+1)*per*r.hd], nil)
		if err != nil {
			return nil, err
		}
		out[g] = make([]float64, len(sc))
		for i, v := range sc {
			out[g][i] = float64(v)
		}
	}
	return out, nil
}

// best is the highest of scores, 0 where none is above it (NaN aside).
func best(scores []float32) float32 {
	var mx float32
	for _, v := range scores {
		if v > mx {
			mx = v
		}
	}
	return mx
}

// noTau is a threshold below every score: the budget alone caps the zoom.
func noTau(n int) []float32 {
	t := make([]float32, n)
	for i := range t {
		t[i] = -1
	}
	return t
}

// boundMethod is the bound-routed span method name at b rows, nil when c
// does not configure it.
func (c *LongConfig) boundMethod(name string, s *spanStore, h []float32, b int, cache *llama.Cache) (*boundSpan, error) {
	if !c.Bound {
		return nil, nil
	}
	w := 0
	var mode boundMode
	switch name {
	case MethodSpanBoundWindow, MethodSpanMeanKeyWindow, MethodSpanBoundChWindow, MethodSpanAnchorWindow:
		w = int(WindowShare * float64(b))
	}
	switch name {
	case MethodSpanAnchor, MethodSpanAnchorWindow:
		mode.anchorsOnly = true
	case MethodSpanAnchorBoundCh:
		mode.anchors, mode.channels = true, c.boundChannels()
	case MethodSpanMeanKey, MethodSpanMeanKeyWindow:
		mode.mean = true
	case MethodSpanBoundCh, MethodSpanBoundChWindow:
		mode.channels = c.boundChannels()
	}
	bs, err := newBoundSpan(s, h, b, c.Span.AnchorShare, w, mode)
	if err != nil {
		return nil, err
	}
	bs.check = c.boundCheck
	return bs, nil
}

// DefaultBoundChannels is LongConfig.BoundChannels's default, chosen
// among 8, 16 and 32 on needles of another seed than those
// docs/quality.md reports ("Key bounds").
const DefaultBoundChannels = 32

func (c *LongConfig) boundChannels() int {
	if c.BoundChannels > 0 {
		return c.BoundChannels
	}
	return DefaultBoundChannels
}
