package spanmem

import (
	"fmt"
	"math"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/reconstruct"
	"github.com/kvstore/kvstore/segment"
)

// Routing is the zoom-in policy of one span memory, what stays on the GPU
// beside the resident rows: per (layer, KV head) group (layer-major) a
// reconstruct.Router over the projected summary keys, and the threshold
// tau. Groups are numbered layer*KVHeads + head throughout.
type Routing struct {
	Layers, KVHeads, Spans, Dim int
	Routers                     []reconstruct.Router // per group
	Tau                         []float32            // per group
	// Keys holds per group the projected summary keys, Spans x Dim.
	Keys [][]float32
	// Factored is per span whether it can be zoomed: unfactored spans are
	// resident at full resolution and always score NaN.
	Factored []bool
	// SpanTokens is per span the rows a zoom adds on the GPU: its length
	// minus its resident rows (anchors), 0 for unfactored spans.
	SpanTokens []int
	// Ends is per span its end (exclusive token index), which the
	// routers' recency term reads (reconstruct.Recency).
	Ends []int
	// SpanBytes is per group and span the K plus V factor bytes a zoom
	// moves.
	SpanBytes [][]int64
	// Projection is the artifact W came from. When it is not the one the
	// memory was built with (a trained W stored since, or the artifact
	// replaced), the summary keys were re-projected with it.
	Projection string
}

// NewRouting builds memory m's routing state from what the store read for
// it: projs, the W of artifact name per group (same: the W m's summary
// keys were projected with, so they are used as stored; else they are
// re-projected), tau per group (nil: reconstruct.DefaultTau), the router
// bias and recency weight per group (nil: 0), and head, which returns one
// (layer, KV head)'s record. An untrained W (any artifact but
// ArtifactRouterW) scores with Scale 1/sqrt(HeadDim).
func NewRouting(m *format.SpanMeta, projs []*segment.Projection, name string, same bool, tau, bias, recency []float32,
	head func(layer, head int) (*format.HeadMeta, error)) (*Routing, error) {
	groups := m.Layers * m.KVHeads
	if len(projs) != groups || (tau != nil && len(tau) != groups) || (bias != nil && len(bias) != groups) ||
		(recency != nil && len(recency) != groups) {
		return nil, fmt.Errorf("%w: routing of %d groups: %d projections, %d tau, %d bias, %d recency", ErrInvalidArgument,
			groups, len(projs), len(tau), len(bias), len(recency))
	}
	rt := &Routing{Layers: m.Layers, KVHeads: m.KVHeads, Spans: len(m.Spans), Dim: projs[0].Dim, Projection: name,
		Routers: make([]reconstruct.Router, groups), Keys: make([][]float32, groups), SpanBytes: make([][]int64, groups), Tau: tau}
	rt.spanCosts(m)
	if rt.Tau == nil {
		rt.Tau = make([]float32, groups)
		for g := range rt.Tau {
			rt.Tau[g] = reconstruct.DefaultTau
		}
	}
	for g := range groups {
		h, err := head(g/rt.KVHeads, g%rt.KVHeads)
		if err != nil {
			return nil, err
		}
		rt.group(g, h, projs[g], same, bias, recency)
	}
	return rt, nil
}

// spanCosts fills Factored and SpanTokens.
func (rt *Routing) spanCosts(m *format.SpanMeta) {
	rt.Factored, rt.SpanTokens, rt.Ends = make([]bool, len(m.Spans)), make([]int, len(m.Spans)), make([]int, len(m.Spans))
	a := 0
	for s, sp := range m.Spans {
		rt.Factored[s] = sp.Factored
		rt.Ends[s] = int(sp.End)
		resident := 0
		for a < len(m.Resident) && m.Resident[a] < sp.End {
			if m.Resident[a] >= sp.Start {
				resident++
			}
			a++
		}
		if sp.Factored {
			rt.SpanTokens[s] = sp.Len() - resident
		}
	}
}

// group fills group g's router, keys and span bytes from its head h.
func (rt *Routing) group(g int, h *format.HeadMeta, p *segment.Projection, same bool, bias, recency []float32) {
	router := reconstruct.Router{Dim: p.Dim, HeadDim: p.HeadDim, W: p.W}
	if rt.Projection != ArtifactRouterW {
		router.Scale = float32(1 / math.Sqrt(float64(p.HeadDim)))
	}
	if bias != nil {
		router.Bias = bias[g]
	}
	if recency != nil {
		router.Recency = recency[g]
	}
	rt.Routers[g] = router
	keys := make([]float32, 0, rt.Spans*p.Dim)
	for _, s := range h.Summaries {
		if same {
			keys = append(keys, s.Proj...)
		} else {
			keys = append(keys, p.Project(nil, s.Key)...)
		}
	}
	rt.Keys[g] = keys
	rt.SpanBytes[g] = make([]int64, rt.Spans)
	for s := range rt.Spans {
		rt.SpanBytes[g][s] = int64(h.K[s].Length) + int64(h.V[s].Length)
	}
}

// Score writes group g's routing score of every span for the given
// pre-RoPE queries (the query heads sharing the KV head, HeadDim each) of
// a token at position pos to dst and returns it: Router.RouteAt's alpha
// for factored spans, NaN for resident ones.
func (rt *Routing) Score(g int, pos int64, queries, dst []float32) ([]float32, error) {
	if g < 0 || g >= len(rt.Routers) {
		return nil, fmt.Errorf("%w: routing group %d of %d", ErrInvalidArgument, g, len(rt.Routers))
	}
	out, err := rt.Routers[g].RouteAt(dst, queries, rt.Keys[g], pos, rt.Ends)
	if err != nil {
		return nil, err
	}
	for s, f := range rt.Factored {
		if !f {
			out[s] = float32(math.NaN())
		}
	}
	return out, nil
}

// Zoom routes the queries of the groups given, a token's at position pos
// (queries[g] nil or empty: the
// group is not routed, as when only one layer's queries are known yet) and
// selects the spans to zoom within budget (reconstruct.Select: descending
// score above tau; the token budget counts SpanTokens, the byte budget
// SpanBytes). The result is the zoom set per group.
func (rt *Routing) Zoom(pos int64, queries [][]float32, budget reconstruct.Budget) (*reconstruct.ZoomSet, error) {
	if len(queries) != len(rt.Routers) {
		return nil, fmt.Errorf("%w: zoom: queries for %d groups, the memory has %d", ErrInvalidArgument, len(queries), len(rt.Routers))
	}
	scores := make([][]float32, len(queries))
	for g, q := range queries {
		if len(q) == 0 {
			scores[g] = nanScores(rt.Spans)
			continue
		}
		var err error
		if scores[g], err = rt.Score(g, pos, q, nil); err != nil {
			return nil, fmt.Errorf("zoom: group %d: %w", g, err)
		}
	}
	return reconstruct.Select(scores, rt.Tau, rt.SpanTokens, rt.SpanBytes, budget)
}

func nanScores(n int) []float32 {
	s := make([]float32, n)
	for i := range s {
		s[i] = float32(math.NaN())
	}
	return s
}
