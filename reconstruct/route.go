package reconstruct

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"github.com/kvstore/kvstore/format"
)

// DefaultTau is SeKV's initial zoom threshold tau, used for every
// (layer, KV head) that has no trained one.
const DefaultTau = 0.05

// Router holds the routing artifacts of one (layer, KV head).
type Router struct {
	// Dim is d', HeadDim the head dimension.
	Dim, HeadDim int
	// W is the routing projection, Dim x HeadDim row-major (a trained one,
	// or segment.FitPCA's default).
	W []float32
	// Bias is b, added to the logit (0 by default).
	Bias float32
	// Scale multiplies the dot product before the bias; 0 means 1 (SeKV's
	// formula). An untrained PCA projection has no calibration of its own:
	// 1/sqrt(HeadDim) puts its logits on attention's scale.
	Scale float32
	// Recency is rho, the weight of the recency term rho * Recency(pos,
	// end_s) added to the logit (0: none, SeKV's formula). A router with
	// one scores only through RouteAt, which knows the query's position.
	Recency float32
}

// Recency is the recency feature of a span ending at token end (exclusive)
// for a query at position pos: ln(pos+1) - ln(pos+1-end), the distance
// pos+1-end taken as at least 1. It is 0 for a span ending at the
// context's start and grows as the span nears the query; it depends on
// end/(pos+1) alone, so it reads the same at any context length.
func Recency(pos int64, end int) float64 {
	d := max(float64(pos)+1-float64(end), 1)
	return math.Log(float64(pos)+1) - math.Log(d)
}

// Route scores the spans of one (layer, KV head) for the current query:
//
//	alpha[s] = sigmoid(Scale * ((W q) . summaries[s]) + Bias)
//
// summaries holds each span's projected summary key (Dim floats per span,
// segment.ProjectedKeys). queries holds one or more pre-RoPE query vectors
// of HeadDim (the query heads sharing this KV head under GQA); a span's
// score is the largest over them, so a span is zoomed if any of the heads
// wants it. Scores are written to dst (reused when it has room) and
// returned.
//
// Arithmetic: W q and the dot products are float32, each product and sum
// rounded on its own, summed in ascending index; the logit is
// float32(Scale*dot) + Bias; the sigmoid is taken in float64 and rounded
// once. A NaN anywhere gives a NaN score, which no threshold passes.
// Errors wrap format.ErrInvalidArgument.
func (r *Router) Route(dst, queries, summaries []float32) ([]float32, error) {
	if r.Recency != 0 {
		return nil, fmt.Errorf("%w: route: the router has a recency weight (%v): score with RouteAt", format.ErrInvalidArgument, r.Recency)
	}
	return r.route(dst, queries, summaries, 0, nil)
}

// RouteAt is Route for a query at position pos over spans ending at ends
// (exclusive token indices, one per span; nil only for a router without a
// recency weight), with the recency term:
//
//	alpha[s] = sigmoid(Scale * ((W q) . summaries[s]) + Bias + Recency * Recency(pos, ends[s]))
//
// the term rounded to float32 and added to the logit after the bias.
func (r *Router) RouteAt(dst, queries, summaries []float32, pos int64, ends []int) ([]float32, error) {
	if r.Dim > 0 && len(summaries)%r.Dim == 0 && (ends != nil || r.Recency != 0) && len(ends) != len(summaries)/r.Dim {
		return nil, fmt.Errorf("%w: route: %d span ends for %d summaries", format.ErrInvalidArgument, len(ends), len(summaries)/r.Dim)
	}
	if pos < 0 {
		return nil, fmt.Errorf("%w: route: query position %d", format.ErrInvalidArgument, pos)
	}
	return r.route(dst, queries, summaries, pos, ends)
}

func (r *Router) route(dst, queries, summaries []float32, pos int64, ends []int) ([]float32, error) {
	switch {
	case r.HeadDim < 1 || r.Dim < 1 || len(r.W) != r.Dim*r.HeadDim:
		return nil, fmt.Errorf("%w: route: projection %dx%d with %d weights", format.ErrInvalidArgument, r.Dim, r.HeadDim, len(r.W))
	case len(queries) == 0 || len(queries)%r.HeadDim != 0:
		return nil, fmt.Errorf("%w: route: %d query floats is not a positive number of %d-dim queries", format.ErrInvalidArgument, len(queries), r.HeadDim)
	case len(summaries)%r.Dim != 0:
		return nil, fmt.Errorf("%w: route: %d summary floats is not a number of %d-dim summaries", format.ErrInvalidArgument, len(summaries), r.Dim)
	}
	spans := len(summaries) / r.Dim
	if cap(dst) < spans {
		dst = make([]float32, spans)
	}
	dst = dst[:spans]
	for s := range dst {
		dst[s] = float32(math.NaN())
	}
	scale := r.Scale
	if scale == 0 {
		scale = 1
	}
	// dst holds each span's largest logit over the query heads, then its
	// score: the sigmoid and the rounding are monotone, so the score of
	// the largest logit is the largest score, and the recency term, the
	// same for every head, is added once.
	pq := make([]float32, r.Dim)
	for g := 0; g < len(queries)/r.HeadDim; g++ {
		r.project(pq, queries[g*r.HeadDim:(g+1)*r.HeadDim])
		for s := range dst {
			var dot float32
			for k, v := range summaries[s*r.Dim : (s+1)*r.Dim] {
				dot += float32(pq[k] * v)
			}
			logit := float32(scale*dot) + r.Bias
			if math.IsNaN(float64(dst[s])) || logit > dst[s] {
				dst[s] = logit
			}
		}
	}
	for s, logit := range dst {
		if r.Recency != 0 {
			logit += float32(float64(r.Recency) * Recency(pos, ends[s]))
		}
		dst[s] = routeSigmoid(logit)
	}
	return dst, nil
}

// project writes W q into pq.
func (r *Router) project(pq, q []float32) {
	for k := range pq {
		var acc float32
		for j, w := range r.W[k*r.HeadDim : (k+1)*r.HeadDim] {
			acc += float32(w * q[j])
		}
		pq[k] = acc
	}
}

func routeSigmoid(x float32) float32 {
	return float32(1 / (1 + math.Exp(-float64(x))))
}

// Budget bounds a zoom set across all (layer, KV head) groups. A zero field
// is no limit.
type Budget struct {
	// Tokens bounds the rows reconstructed: a span of n tokens zoomed in
	// one (layer, KV head) costs n.
	Tokens int64
	// Bytes bounds the factor bytes moved to the GPU.
	Bytes int64
	// Fill, when true, skips a span that does not fit and goes on with
	// lower-scored ones; when false, selection stops at the first span that
	// does not fit, so no span is zoomed while a higher-scored one is not.
	Fill bool
}

// Zoom is one zoomed span: its (layer, KV head) group, index and score.
type Zoom struct {
	Group, Span int
	Score       float32
}

// ZoomSet is the spans chosen by Select.
type ZoomSet struct {
	// Spans lists, per group, the zoomed span indices in ascending order.
	Spans [][]int
	// Order is every zoom in the order chosen (descending score), the order
	// in which to fetch their factors.
	Order []Zoom
	// Tokens and Bytes are the budget used.
	Tokens, Bytes int64
}

// Select chooses the spans to zoom within a budget. scores[g][s] is span
// s's score (Router.Route) in group g (a (layer, KV head), conventionally
// layer*kvHeads + head); a span is a candidate in g when its score is above
// tau[g] (tau nil means DefaultTau everywhere; a NaN score never is, so
// callers mark spans that are always resident, such as unfactored ones, with
// NaN). Candidates are taken in descending score, ties broken by ascending
// span index and then group, while they fit the budget (see Budget.Fill).
// spanTokens[s] is span s's length; spanBytes[g][s] its factor bytes in
// group g, which may be nil when budget.Bytes is 0.
//
// The result is deterministic. Errors wrap format.ErrInvalidArgument: rows of
// scores, tau or spanBytes that do not match, or negative costs.
func Select(scores [][]float32, tau []float32, spanTokens []int, spanBytes [][]int64, budget Budget) (*ZoomSet, error) {
	if err := selectCheck(scores, tau, spanTokens, spanBytes, budget); err != nil {
		return nil, err
	}
	var cands []Zoom
	for g, row := range scores {
		t := float32(DefaultTau)
		if tau != nil {
			t = tau[g]
		}
		for s, a := range row {
			if a > t {
				cands = append(cands, Zoom{Group: g, Span: s, Score: a})
			}
		}
	}
	slices.SortFunc(cands, func(a, b Zoom) int {
		return cmp.Or(cmp.Compare(b.Score, a.Score), cmp.Compare(a.Span, b.Span), cmp.Compare(a.Group, b.Group))
	})
	z := &ZoomSet{Spans: make([][]int, len(scores))}
	for _, c := range cands {
		tok := int64(spanTokens[c.Span])
		var by int64
		if spanBytes != nil {
			by = spanBytes[c.Group][c.Span]
		}
		if (budget.Tokens > 0 && z.Tokens+tok > budget.Tokens) || (budget.Bytes > 0 && z.Bytes+by > budget.Bytes) {
			if budget.Fill {
				continue
			}
			break
		}
		z.Tokens += tok
		z.Bytes += by
		z.Order = append(z.Order, c)
		z.Spans[c.Group] = append(z.Spans[c.Group], c.Span)
	}
	for _, s := range z.Spans {
		slices.Sort(s)
	}
	return z, nil
}

func selectCheck(scores [][]float32, tau []float32, spanTokens []int, spanBytes [][]int64, budget Budget) error {
	bad := func(what string, args ...any) error {
		return fmt.Errorf("%w: select: %s", format.ErrInvalidArgument, fmt.Sprintf(what, args...))
	}
	if tau != nil && len(tau) != len(scores) {
		return bad("%d thresholds for %d groups", len(tau), len(scores))
	}
	if spanBytes == nil && budget.Bytes > 0 {
		return bad("a byte budget without span bytes")
	}
	if spanBytes != nil && len(spanBytes) != len(scores) {
		return bad("span bytes for %d groups, scores for %d", len(spanBytes), len(scores))
	}
	if budget.Tokens < 0 || budget.Bytes < 0 {
		return bad("negative budget %+v", budget)
	}
	for _, n := range spanTokens {
		if n < 0 {
			return bad("negative span length %d", n)
		}
	}
	for g, row := range scores {
		if len(row) != len(spanTokens) {
			return bad("group %d has %d scores for %d spans", g, len(row), len(spanTokens))
		}
		if spanBytes == nil {
			continue
		}
		if len(spanBytes[g]) != len(spanTokens) {
			return bad("group %d has %d span byte counts for %d spans", g, len(spanBytes[g]), len(spanTokens))
		}
		for _, b := range spanBytes[g] {
			if b < 0 {
				return bad("negative span bytes %d in group %d", b, g)
			}
		}
	}
	return nil
}
