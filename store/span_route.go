package store

import (
	"github.com/kvstore/kvstore/reconstruct"
	"github.com/kvstore/kvstore/store/internal/spanmem"
)

// Routing is the zoom-in policy of one span memory, what stays on the GPU
// beside the resident rows: per (layer, KV head) group (layer-major) a
// reconstruct.Router over the projected summary keys, and the threshold
// tau. Groups are numbered layer*KVHeads + head throughout.
type Routing struct {
	// Layers, KVHeads and Spans are the memory's shape; Dim is d', the
	// projected dimension.
	Layers, KVHeads, Spans, Dim int
	// Routers is per group the router that scores spans.
	Routers []reconstruct.Router
	// Tau is per group the threshold a span's score must pass.
	Tau []float32
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

// fromRouting is spanmem's routing as the store's (the same fields, the
// same memory); nil stays nil.
func fromRouting(rt *spanmem.Routing) *Routing { return (*Routing)(rt) }

// toRouting is rt as spanmem's, which scores.
func toRouting(rt *Routing) *spanmem.Routing { return (*spanmem.Routing)(rt) }

// Score writes group g's routing score of every span for the given
// pre-RoPE queries (the query heads sharing the KV head, HeadDim each) of
// a token at position pos to dst and returns it: Router.RouteAt's alpha
// for factored spans, NaN for resident ones.
func (rt *Routing) Score(g int, pos int64, queries, dst []float32) ([]float32, error) {
	return toRouting(rt).Score(g, pos, queries, dst)
}

// Zoom routes the queries of the groups given, a token's at position pos
// (queries[g] nil or empty: the
// group is not routed, as when only one layer's queries are known yet) and
// selects the spans to zoom within budget (reconstruct.Select: descending
// score above tau; the token budget counts SpanTokens, the byte budget
// SpanBytes). The result is the zoom set per group.
func (rt *Routing) Zoom(pos int64, queries [][]float32, budget reconstruct.Budget) (*reconstruct.ZoomSet, error) {
	return toRouting(rt).Zoom(pos, queries, budget)
}
