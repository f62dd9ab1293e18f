package quality

import (
	"fmt"
	"math"
	"slices"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/lab/llama"
	"github.com/kvstore/kvstore/store"
)

// Span memory on the retrieval heads only: DuoAttention's split of the KV
// heads into retrieval heads, which read far back, and streaming heads,
// which read the sinks and the recent rows, with SeKV's span memory in
// place of DuoAttention's full KV on the retrieval heads. Which heads
// retrieve is measured once per model, offline, on needles of training
// text (HeadRetrieval), never on the context being decoded.
//
// The budget is the model's: B rows per (layer, KV head) on average, G*B
// over its G KV heads. A streaming head keeps the sinks and the last rows,
// W = StreamShare*B in all; the rest, (G*B - S*W)/R rows for each of the R
// retrieval heads (at most RetrievalCap of the context when set, but
// never fewer than B, the streaming heads' windows then taking what is
// left), is span+anchor memory (resident anchors, zoom by the
// anchors' attention), the zoom of a layer shared by its retrieval heads
// only, with an optional threshold (LongConfig.ZoomTau, ZoomRel) below
// which a span is not zoomed even where the budget has room. Rows are
// counted per step over every head and reported as the mean per head.
const MethodSpanHeads = "span+heads"

// MethodSpanHeadsOracle is MethodSpanHeads zoomed by the teacher's
// attention mass per span (as MethodSpanOracle) in place of the anchors'
// attention, with the same thresholds (below LongConfig.ZoomGate only,
// when set, without them): the ceiling of its routing.
const MethodSpanHeadsOracle = "span+heads+oracle"

// MethodSpanHeadsRouter and MethodSpanHeadsTrained rank MethodSpanHeads'
// zoom by SeKV's routers in place of the anchors' attention (below
// LongConfig.ZoomGate only, when set): the memory's own untrained
// routers, or the trained ones of LongConfig.Routers. The routers'
// projected summary keys are counted in the retrieval heads' rows.
const (
	MethodSpanHeadsRouter  = "span+heads+router"
	MethodSpanHeadsTrained = "span+heads+trained"
)

// DefaultStreamShare is LongConfig.StreamShare's default.
const DefaultStreamShare = 0.5

// DefaultRetrievalMass is the HeadRetrieval share at or above which a head
// is a retrieval head (RetrievalHeads).
const DefaultRetrievalMass = 0.05

// HeadRetrieval is, per (layer, KV head) (index layer*KVHeads+head), the
// attention that full attention puts on each needle's recalled definition
// line from the queries that predict its value (the recall line's last
// token and the value's bytes but the last), averaged over the KV head's
// query heads, those queries and the needles. Each needle is prefilled
// whole up to its recall line, the recall line and value then forwarded
// with their attention.
func HeadRetrieval(m *llama.Model, needles []*Needle) ([]float64, error) {
	if m == nil || len(needles) == 0 {
		return nil, fmt.Errorf("%w: quality: head retrieval of %d needles", format.ErrInvalidArgument, len(needles))
	}
	per := m.Heads / m.KVHeads
	out := make([]float64, m.Layers*m.KVHeads)
	for i, nd := range needles {
		n := nd.Context
		if nd.Def[1] <= nd.Def[0] || nd.Def[1] > n || nd.Query < 1 || nd.ValueLen < 1 || n+nd.Query+nd.ValueLen > len(nd.Tokens) {
			return nil, fmt.Errorf("%w: quality: needle %d: definition %v in a context of %d", format.ErrInvalidArgument, i, nd.Def, n)
		}
		pre, err := m.Forward(nd.Tokens[:n], 0, nil, llama.ForwardOptions{LastOnly: true})
		if err != nil {
			return nil, fmt.Errorf("quality: needle %d: %w", i, err)
		}
		res, err := m.Forward(nd.Tokens[n:n+nd.Query+nd.ValueLen-1], int64(n), pre.Cache, llama.ForwardOptions{Attention: true})
		if err != nil {
			return nil, fmt.Errorf("quality: needle %d: %w", i, err)
		}
		for l := range m.Layers {
			for g := range m.KVHeads {
				var s float64
				for h := g * per; h < (g+1)*per; h++ {
					for q := nd.Query - 1; q < nd.Query-1+nd.ValueLen; q++ {
						for _, w := range res.Attention[l][h][q][nd.Def[0]:nd.Def[1]] {
							s += float64(w)
						}
					}
				}
				out[l*m.KVHeads+g] += s / float64(per*nd.ValueLen*len(needles))
			}
		}
	}
	return out, nil
}

// HeadRetrievalOn is HeadRetrieval over cfg's single needles (Files,
// Window, Needles, Seed; Progress told of each as it is made).
func HeadRetrievalOn(cfg NeedleConfig) ([]float64, error) {
	needles, err := retrievalNeedles(cfg)
	if err != nil {
		return nil, err
	}
	return HeadRetrieval(cfg.Model, needles)
}

// HeadRetrievalByDepth is HeadRetrievalOn's needles split by the third of
// the depths their definition lies in ([0, 0.3), [0.3, 0.6), [0.6, 0.9)):
// per third, HeadRetrieval over its needles (nil where it has none) and
// how many there are.
func HeadRetrievalByDepth(cfg NeedleConfig) ([3][]float64, [3]int, error) {
	var out [3][]float64
	var count [3]int
	needles, err := retrievalNeedles(cfg)
	if err != nil {
		return out, count, err
	}
	var thirds [3][]*Needle
	for _, nd := range needles {
		thirds[nd.third()] = append(thirds[nd.third()], nd)
	}
	for i, nds := range thirds {
		if count[i] = len(nds); count[i] == 0 {
			continue
		}
		if out[i], err = HeadRetrieval(cfg.Model, nds); err != nil {
			return out, count, err
		}
	}
	return out, count, nil
}

// retrievalNeedles are cfg's single needles.
func retrievalNeedles(cfg NeedleConfig) ([]*Needle, error) {
	if cfg.Model == nil {
		return nil, fmt.Errorf("%w: quality: head retrieval: no model", format.ErrInvalidArgument)
	}
	cfg.Keys = 1
	var needles []*Needle
	if _, err := cfg.eachNeedle(func(nd *Needle) error { needles = append(needles, nd); return nil }); err != nil {
		return nil, err
	}
	return needles, nil
}

// RetrievalHeads marks the heads whose HeadRetrieval mass is at least min.
func RetrievalHeads(mass []float64, min float64) []bool {
	out := make([]bool, len(mass))
	for i, v := range mass {
		out[i] = v >= min
	}
	return out
}

// StreamRank is Config.HeadRank giving the streaming heads (those not
// marked in retrieval) factor rank r and leaving the retrieval heads'
// to the energy threshold (0); nil for r = 0.
func StreamRank(retrieval []bool, r int) []float32 {
	if r == 0 || retrieval == nil {
		return nil
	}
	out := make([]float32, len(retrieval))
	for i, ret := range retrieval {
		if !ret {
			out[i] = float32(r)
		}
	}
	return out
}

// headSplit is MethodSpanHeads: per (layer, KV head), the streaming rows
// or span memory's.
type headSplit struct {
	bs        *boundSpan
	win       *fixedRows
	winTokens []int // the streaming heads' context tokens, ascending
	retrieval []bool
	kvHeads   int
	// stepRows are the rows handed out so far in the step being decoded;
	// maxRows the most of one step, per head.
	stepRows, maxRows float64
	fixed             float64 // rows per head every step holds: its budget's floor
}

// newHeadSplit is MethodSpanHeads at b rows per head with lc's settings
// (after defaults): streaming heads keep floor(StreamShare*b) rows (sinks
// and the last context rows), the Retrieval heads share the rest as
// span+anchor memory with anchors at most Span.AnchorShare of their rows;
// RetrievalCap > 0 caps a retrieval head at that share of the context (at
// least b rows), the streaming heads' windows taking the rest; ZoomTau and
// ZoomRel are the zoom's thresholds.
//
// keys is the rows each span's routing keys cost a retrieval head (0 where
// the anchors' attention alone routes).
func newHeadSplit(s *spanStore, h []float32, c *llama.Cache, b int, lc *LongConfig, keys float64) (*headSplit, error) {
	meta := s.meta
	share, stream, capShare, retrieval := lc.Span.AnchorShare, lc.StreamShare, lc.RetrievalCap, lc.Retrieval
	groups := meta.Layers * meta.KVHeads
	if len(retrieval) != groups {
		return nil, fmt.Errorf("%w: quality: %d retrieval flags for %d KV heads", format.ErrInvalidArgument, len(retrieval), groups)
	}
	nr := 0
	perLayer := make([]int64, meta.Layers)
	for gi, r := range retrieval {
		if r {
			nr++
			perLayer[gi/meta.KVHeads]++
		}
	}
	n := c.Len()
	w, r := b, b
	if nr > 0 && nr < groups {
		w = min(b, max(sinks+1, int(math.Floor(stream*float64(b)))))
		r = (groups*b - (groups-nr)*w) / nr
		if most := int(math.Floor(capShare * float64(n))); capShare > 0 && r > most {
			// The rows a retrieval head would hold past the cap go to
			// the streaming heads' windows.
			r = max(b, most)
			w = (groups*b - nr*r) / (groups - nr)
		}
	}
	// The streaming heads' rows are the stored memory's, as a reader
	// of it would have them: exact where resident, reconstructed where
	// their span is factored.
	wt := streamTokens(h, min(w, n), lc.StreamTop)
	win, err := s.keepRows(wt)
	if err != nil {
		return nil, err
	}
	hs := &headSplit{win: win, winTokens: wt, retrieval: retrieval, kvHeads: meta.KVHeads}
	bs, err := newBoundSpan(s, h, min(r, n), share, 0, boundMode{anchorsOnly: true, keys: keys})
	if err != nil {
		return nil, err
	}
	// The zoom rows of a layer are its retrieval heads' only.
	bs.layerZoom = make([]int64, meta.Layers)
	for l, k := range perLayer {
		bs.layerZoom[l] = bs.zoom / int64(meta.KVHeads) * k
	}
	bs.heads = retrieval
	bs.tau, bs.rel, bs.gate, bs.within = lc.zoomTaus(groups), float32(lc.ZoomRel), float32(lc.ZoomGate), lc.RankWithin
	hs.bs = bs
	hs.fixed = (float64(groups-nr)*float64(min(w, n)) + float64(nr)*bs.fixedRows) / float64(groups)
	return hs, nil
}

// headMethod is the span+heads method name at b rows: its zoom ranked by
// the anchors' attention (MethodSpanHeads), the teacher's mass
// (MethodSpanHeadsOracle) or SeKV's routers, the memory's own
// (MethodSpanHeadsRouter) or c.Routers (MethodSpanHeadsTrained, read into
// *trained once per context), or c.RankFit (MethodSpanHeadsFit).
func (c *LongConfig) headMethod(name string, s *spanStore, h []float32, cache *llama.Cache, b int, trained **store.Routing) (*headSplit, error) {
	var rank spanRanker
	var keys float64
	switch name {
	case MethodSpanHeadsOracle:
		rank = newTeacher(c.Model, cache, s.meta)
	case MethodSpanHeadsRouter, MethodSpanHeadsTrained:
		rt := s.rt
		if name == MethodSpanHeadsTrained {
			if *trained == nil {
				var err error
				if *trained, err = s.trainedRouting(c.Model, &c.Span, c.Routers); err != nil {
					return nil, err
				}
			}
			rt = *trained
		}
		rank, keys = routerRank{s.routing(rt), s.hd}, float64(rt.Dim)/float64(2*s.hd)
	case MethodSpanHeadsFit:
		keys = rankMeanCost
	}
	hs, err := newHeadSplit(s, h, cache, b, c, keys)
	if err != nil {
		return nil, err
	}
	if name == MethodSpanHeadsFit {
		if rank, err = c.fitRanker(hs.bs, cache); err != nil {
			return nil, err
		}
	}
	hs.bs.rank = rank
	return hs, nil
}

// streamTokens are a streaming head's w rows of a context of surprisals
// h: the sinks and the last rows, top of them (a share) the rows of
// highest surprisal before the window in place of its oldest.
func streamTokens(h []float32, w int, top float64) []int {
	n := len(h)
	k := int(math.Floor(top * float64(max(0, w-sinks))))
	tokens := windowTokens(n, w-k)
	if k == 0 {
		return tokens
	}
	rest := slices.Clone(h)
	for _, t := range tokens {
		rest[t] = float32(math.Inf(-1))
	}
	tokens = append(tokens, topSurprisal(rest, k)...)
	slices.Sort(tokens)
	return slices.Compact(tokens)
}

func (hs *headSplit) rows(a *llama.StepAttention) ([]rowSet, error) {
	span, err := hs.bs.rows(a)
	if err != nil {
		return nil, err
	}
	win, err := hs.win.rows(a)
	if err != nil {
		return nil, err
	}
	if a.Layer == 0 {
		hs.stepRows = 0
	}
	hd := hs.bs.s.hd
	out := make([]rowSet, len(span))
	for g := range out {
		out[g] = win[g]
		if hs.retrieval[a.Layer*hs.kvHeads+g] {
			out[g] = span[g]
		}
		hs.stepRows += float64(len(out[g].k) / hd)
	}
	hs.maxRows = max(hs.maxRows, hs.stepRows/float64(len(hs.retrieval)))
	return out, nil
}
