package quality

import (
	"errors"
	"fmt"
	"math"

	"github.com/kvstore/kvstore/lab/llama"
	"github.com/kvstore/kvstore/lab/router"
	"github.com/kvstore/kvstore/prune"
	"github.com/kvstore/kvstore/store"
)

// Long-context methods besides Row's (MethodWindow, MethodTop, MethodSpan,
// MethodSpanSum).
const (
	MethodFull        = "full"
	MethodSnapKV      = "snapkv"
	MethodTOVA        = "tova"
	MethodSnapKVQuery = "snapkv+query" // SnapKV voted by the recall line: query-aware, an upper reference
)

// LongMethods are the methods of a long-context measurement at each
// budget, in report order (MethodSnapKVQuery only where a query is given).
var LongMethods = []string{MethodWindow, MethodTop, MethodSnapKV, MethodTOVA, MethodSpan, MethodSpanSum, MethodSnapKVQuery}

// LongConfig is a long-context measurement's model and methods.
type LongConfig struct {
	Model *llama.Model
	// Budgets are the GPU budgets as fractions of the context's KV.
	Budgets []float64
	// Observe is SnapKV's observation window, the context's last rows
	// (0: 32); Kernel its pooling kernel (0: 7).
	Observe, Kernel int
	// Span configures span memory: Segment, Energy, MaxRank, FactorDType,
	// AnchorShare, Tau as Config's (its other fields are not read).
	Span Config
	// Routers, when not nil, are trained router artifacts
	// (lab/router.Params.Artifacts) for MethodSpanTrained and
	// MethodSpanTrainedSum; Oracle adds MethodSpanOracle (routed.go).
	Routers []router.Artifact
	Oracle  bool
	// Bound adds MethodSpanBound, MethodSpanBoundWindow,
	// MethodSpanBoundCh, MethodSpanBoundChWindow, MethodSpanMeanKey and
	// MethodSpanMeanKeyWindow, MethodSpanAnchor, MethodSpanAnchorWindow and
	// MethodSpanAnchorBoundCh (bound.go); BoundChannels is
	// MethodSpanBoundCh's channels (0: DefaultBoundChannels).
	Bound         bool
	BoundChannels int
	// Retrieval, when not nil, marks per (layer, KV head) (index
	// layer*KVHeads+head) the retrieval heads of MethodSpanHeads (heads.go;
	// RetrievalHeads picks them from HeadRetrieval on training needles),
	// which it adds; StreamShare is the share of the budget a streaming
	// head keeps (0: DefaultStreamShare), RetrievalCap the most of the
	// context a retrieval head keeps, the streaming heads' windows taking
	// the rows above it (0: no cap; a cap trades natural text for needles
	// at 25%, docs/quality.md "Retrieval heads").
	Retrieval    []bool
	StreamShare  float64
	RetrievalCap float64
	// StreamTop is the share of a streaming head's rows that are the
	// context's rows of highest surprisal outside its window, in place of
	// the window's oldest (0: the window alone).
	StreamTop float64
	// ZoomTau, when above 0, is the score (the anchors' attention, as
	// span+anchor routes) a span must pass for MethodSpanHeads to zoom it,
	// and ZoomRel, when above 0, the share of its KV head's best score it
	// must reach: the zoom then holds at most its budget, fewer rows
	// where a step's attention is not on many spans (0: the budget alone
	// caps the zoom; docs/quality.md "A zoom threshold").
	ZoomTau float64
	ZoomRel float64
	// ZoomTauHead, when set, is per (layer, KV head) (index
	// layer*KVHeads+head) the ZoomTau of that head where above 0, ZoomTau
	// elsewhere; 1 keeps a head from zooming.
	ZoomTauHead []float64
	// ZoomGate, when above 0, applies ZoomTau and ZoomRel to a KV head at
	// a step only when its best span score reaches it (a query that
	// attends sharply to one span, as a copy does); below it the budget
	// alone caps the zoom (0: the thresholds apply at every step).
	ZoomGate float64
	// RankWithin has a ranker in place of the anchors' attention
	// (MethodSpanHeadsRouter, MethodSpanHeadsTrained, MethodSpanHeadsOracle,
	// MethodSpanHeadsFit) order only the spans whose anchor score passes
	// ZoomTau and ZoomRel (at every step, or above ZoomGate), the budget
	// alone capping those: the anchors' threshold decides how much a step
	// zooms, the ranker which spans.
	RankWithin bool
	// RankFit, when not nil with Retrieval, adds MethodSpanHeadsFit, its
	// zoom ranked by this fitted ranker (FitRank; rankfit.go).
	RankFit *RankFit
	// rankData, when set, gathers FitRank's training set: MethodSpanHeadsFit
	// then routes by the anchors' attention, as MethodSpanHeads.
	rankData *rankData
	// Only, when not empty, keeps of the methods above these (full KV is
	// always measured).
	Only []string
	// boundCheck, when set, is given every bound the bound methods
	// compute with the largest true logit it bounds (boundSpan.check).
	boundCheck func(bound, logit float64)
	// SpanSize, when not nil, is given each context's stored span memory
	// size (store.SpanSize: stored bytes against its raw bf16 rows).
	SpanSize func(store.SpanSize)
}

// zoomTaus is per group of groups the zoom threshold: ZoomTauHead's
// where above 0, else ZoomTau; nil when neither sets one.
func (c *LongConfig) zoomTaus(groups int) []float32 {
	if c.ZoomTau == 0 && c.ZoomTauHead == nil {
		return nil
	}
	tau := make([]float32, groups)
	for gi := range tau {
		tau[gi] = float32(c.ZoomTau)
		if gi < len(c.ZoomTauHead) && c.ZoomTauHead[gi] > 0 {
			tau[gi] = float32(c.ZoomTauHead[gi])
		}
	}
	return tau
}

func (c *LongConfig) defaults() error {
	if c.Model == nil {
		return fmt.Errorf("%w: quality: long context: no model", prune.ErrInvalidArgument)
	}
	if c.Observe == 0 {
		c.Observe = 32
	}
	if c.Kernel == 0 {
		c.Kernel = 7
	}
	c.Span.Model, c.Span.Context, c.Span.Continuation = c.Model, 2*sinks, 1
	if c.Span.Name == "" {
		c.Span.Name = "long"
	}
	c.Span.ensureDefaults()
	if err := c.Span.validate(); err != nil {
		return err
	}
	if c.StreamShare == 0 {
		c.StreamShare = DefaultStreamShare
	}
	if !(c.StreamShare > 0 && c.StreamShare <= 1) || !(c.RetrievalCap >= 0 && c.RetrievalCap <= 1) || !(c.StreamTop >= 0 && c.StreamTop <= 1) {
		return fmt.Errorf("%w: quality: stream share %v, retrieval cap %v, stream top %v", prune.ErrInvalidArgument, c.StreamShare, c.RetrievalCap, c.StreamTop)
	}
	if !(c.ZoomTau >= 0 && c.ZoomTau <= 1) || !(c.ZoomRel >= 0 && c.ZoomRel <= 1) || !(c.ZoomGate >= 0 && c.ZoomGate <= 1) {
		return fmt.Errorf("%w: quality: zoom tau %v, relative %v, gate %v", prune.ErrInvalidArgument, c.ZoomTau, c.ZoomRel, c.ZoomGate)
	}
	g := c.Model.Layers * c.Model.KVHeads
	if c.ZoomTauHead != nil && len(c.ZoomTauHead) != g {
		return fmt.Errorf("%w: quality: %d per-head zoom thresholds for %d KV heads", prune.ErrInvalidArgument, len(c.ZoomTauHead), g)
	}
	for gi, t := range c.ZoomTauHead {
		if !(t >= 0 && t <= 1) {
			return fmt.Errorf("%w: quality: zoom tau %v of KV head %d", prune.ErrInvalidArgument, t, gi)
		}
	}
	if c.Retrieval != nil && len(c.Retrieval) != g {
		return fmt.Errorf("%w: quality: %d retrieval flags for %d KV heads", prune.ErrInvalidArgument, len(c.Retrieval), g)
	}
	for _, f := range c.Budgets {
		if !(f > 0 && f <= 1) {
			return fmt.Errorf("%w: quality: budget %v not in (0, 1]", prune.ErrInvalidArgument, f)
		}
	}
	return c.checkOnly()
}

// errSpanBuild marks a context whose span memory could not be built (an
// SVD that did not converge): the needle or file is left out for every
// method and counted.
var errSpanBuild = errors.New("quality: span memory not built")

// methodRun is one method's logits over a continuation at one budget.
type methodRun struct {
	Budget float64 // 1 for MethodFull
	Method string
	Logits [][]float32
	// Rows is the most context rows one (layer, KV head) held at any step
	// (span memory: the most of a layer's rows at one step over its KV
	// heads, which share the layer's zoom budget); Limit the budget's rows,
	// floor(Budget*context). Over: the method's fixed rows alone exceed it.
	Rows, Limit float64
	Over        bool
}

// runMethods prefills ctx, builds every method's memory from it alone and
// decodes cont (teacher-forced) with each. query > 0 is the length of
// cont's prefix that SnapKVQuery votes with (the recall line before its
// answer); 0 leaves that method out.
func (c *LongConfig) runMethods(ctx, cont []int, query int) ([]methodRun, error) {
	m, n := c.Model, len(ctx)
	w := min(c.Observe, n/2)
	if n < 2*sinks || len(cont) < 1 || query > len(cont) {
		return nil, fmt.Errorf("%w: quality: long context of %d tokens, continuation %d, query %d", prune.ErrInvalidArgument, n, len(cont), query)
	}
	// Prefill in two calls, the second the observation window with its
	// attention (SnapKV's and TOVA's votes), rather than one call's n x n.
	pre, err := m.Forward(ctx[:n-w], 0, nil, llama.ForwardOptions{})
	if err != nil {
		return nil, err
	}
	h := make([]float32, n)
	h[0] = float32(math.NaN())
	for t := 1; t < n-w; t++ {
		h[t] = float32(pre.Surprisal[t-1])
	}
	h[n-w] = float32(-llama.LogProbs(pre.Logits[n-w-1])[ctx[n-w]])
	obs, err := m.Forward(ctx[n-w:], int64(n-w), pre.Cache, llama.ForwardOptions{Attention: true})
	if err != nil {
		return nil, err
	}
	for t := n - w + 1; t < n; t++ {
		h[t] = float32(obs.Surprisal[t-1-(n-w)])
	}
	cache := obs.Cache
	full, err := decode(m, keepRows(cache, allTokens(n)), cont, n)
	if err != nil {
		return nil, err
	}
	out := []methodRun{{Budget: 1, Method: MethodFull, Logits: full, Rows: float64(n), Limit: float64(n)}}
	var qatt [][][][]float32
	if query > 0 {
		res, err := m.Forward(cont[:query], int64(n), cache.Clone(), llama.ForwardOptions{Attention: true})
		if err != nil {
			return nil, err
		}
		qatt = res.Attention
	}
	s, err := newSpanStore(m, cache, h, &c.Span)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errSpanBuild, err)
	}
	defer s.close()
	var trained *store.Routing
	if c.SpanSize != nil {
		c.SpanSize(s.size)
	}
	for _, f := range c.Budgets {
		b := max(1, int(math.Floor(f*float64(n))))
		for _, name := range c.methods() {
			run := methodRun{Budget: f, Method: name, Limit: float64(b)}
			var meth method
			var sm *spanMethod // a span method's memory: its rows are counted as it zooms
			var hs *headSplit
			switch name {
			case MethodWindow, MethodTop:
				tokens := windowTokens(n, b)
				if name == MethodTop {
					tokens = topSurprisal(h, b)
				}
				meth, run.Rows = keepRows(cache, tokens), float64(len(tokens))
			case MethodSnapKV, MethodTOVA, MethodSnapKVQuery:
				var set *prune.Set
				switch name {
				case MethodSnapKV:
					set, err = prune.SnapKV(obs.Attention, m.KVHeads, n, w, c.Kernel, w, b)
				case MethodTOVA:
					set, err = prune.TOVA(obs.Attention, m.KVHeads, n, 1, b)
				default:
					if qatt == nil {
						continue
					}
					set, err = prune.SnapKV(qatt, m.KVHeads, n, query, c.Kernel, 0, b)
				}
				if err != nil {
					return nil, fmt.Errorf("quality: %s at %v: %w", name, f, err)
				}
				meth, run.Rows = keptRows(cache, set), float64(maxKept(set))
			case MethodSpanTrained, MethodSpanTrainedSum, MethodSpanTrainedWindow, MethodSpanOracle:
				if sm, meth, err = c.routedSpan(name, s, h, b, cache, &trained); err != nil {
					return nil, fmt.Errorf("quality: %s at %v: %w", name, f, err)
				}
			case MethodSpanBound, MethodSpanBoundWindow, MethodSpanBoundCh, MethodSpanBoundChWindow, MethodSpanMeanKey, MethodSpanMeanKeyWindow,
				MethodSpanAnchor, MethodSpanAnchorWindow, MethodSpanAnchorBoundCh:
				bs, err := c.boundMethod(name, s, h, b, cache)
				if err != nil {
					return nil, fmt.Errorf("quality: %s at %v: %w", name, f, err)
				}
				if bs != nil {
					sm, meth = bs.spanMethod, bs
				}
			case MethodSpan, MethodSpanSum:
				sm = newSpanMethod(s, h, b, c.Span.AnchorShare, name == MethodSpanSum)
				meth = sm
			case MethodSpanHeads, MethodSpanHeadsOracle, MethodSpanHeadsRouter, MethodSpanHeadsTrained, MethodSpanHeadsFit:
				if hs, err = c.headMethod(name, s, h, cache, b, &trained); err != nil {
					return nil, fmt.Errorf("quality: %s at %v: %w", name, f, err)
				}
				meth = hs
			}
			if meth == nil { // a method this configuration does not measure
				continue
			}
			if run.Logits, err = decode(m, meth, cont, n); err != nil {
				return nil, fmt.Errorf("quality: %s at %v: %w", name, f, err)
			}
			if sm != nil {
				run.Rows, run.Over = max(sm.stats.maxRows, sm.fixedRows), sm.over
			}
			if hs != nil {
				run.Rows, run.Over = max(hs.maxRows, hs.fixed), hs.fixed > float64(b)
			}
			out = append(out, run)
		}
	}
	return out, nil
}

// keptRows is the method attending, per (layer, KV head), over a keep-set's
// rows of a prefilled cache.
func keptRows(c *llama.Cache, s *prune.Set) *fixedRows {
	hd, n := c.HeadDim, c.Len()
	f := &fixedRows{sets: make([][]rowSet, len(c.Layers))}
	for l, kv := range c.Layers {
		f.sets[l] = make([]rowSet, c.KVHeads)
		for g := range c.KVHeads {
			kept := s.Kept(l, g)
			rs := rowSet{k: make([]float32, 0, len(kept)*hd), v: make([]float32, 0, len(kept)*hd)}
			for _, t := range kept {
				rs.k = append(rs.k, kv.K[(g*n+int(t))*hd:(g*n+int(t)+1)*hd]...)
				rs.v = append(rs.v, kv.V[(g*n+int(t))*hd:(g*n+int(t)+1)*hd]...)
			}
			f.sets[l][g] = rs
		}
	}
	return f
}

// maxKept is the most rows any (layer, KV head) of s keeps.
func maxKept(s *prune.Set) int {
	n := 0
	for _, k := range s.Keep {
		n = max(n, len(k))
	}
	return n
}
