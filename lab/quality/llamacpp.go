//go:build (linux || darwin) && (amd64 || arm64)

package quality

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/format/gguf"
	"github.com/kvstore/kvstore/lab/llama"
	"github.com/kvstore/kvstore/llamacpp"
	"github.com/kvstore/kvstore/reconstruct"
	"github.com/kvstore/kvstore/store"
)

// Span memory served to llama.cpp. The request's rows are chosen once,
// before decoding: the question's queries (the recall line before the
// value), computed by the lab model over the resident rows alone, route
// every (layer, KV head) against the span summaries. The lab's span method
// re-routes at every decoded token and layer instead, its zoom budget
// shared by a layer's KV heads.
//
// A llama.cpp cell holds one position for every layer and KV head, two
// ways to load the choice:
//   - MethodSpanRequest: per (layer, KV head) its own spans
//     (llamacpp.GroupSpans, B minus the resident rows each), topped up
//     with the most recent rows it lacks to the largest group's count C,
//     loaded as C cells whose positions are labels (llamacpp.SpanGroupRows:
//     attention reads a cell's position only to mask it, the keys are
//     rotated for their own positions). C <= B rows per (layer, KV head).
//   - MethodSpanUnion: one span set for all groups (llamacpp.RequestSpans,
//     spans by their best score over the groups) at their true positions,
//     with the context's last row (llama.cpp decodes on only after the
//     last cell's position): every cell is a row of every group, so the
//     resident rows, the last row and the zoomed spans' other rows
//     together fill at most B cells.
//   - MethodSpanAnchorUnion: as MethodSpanUnion, the spans ranked by the
//     attention the question's queries put on the resident anchors each
//     holds or follows (span+anchor's signal) in place of the routers'.
//   - MethodSpanHeadsRequest: span+heads with every (layer, KV head) at B
//     rows (a cache of C cells holds C rows of every head, so no head
//     can hold more): a streaming head's window, a retrieval head's
//     anchors and the spans the question's anchor attention zooms,
//     loaded with label positions as MethodSpanRequest is.

// Engines of a LlamaNeedleRow.
const (
	EngineLab   = "lab"
	EngineLlama = "llama.cpp"
)

// Span memory with a request-time row set: the same rows at every step.
const (
	MethodSpanRequest = "span@request" // per (layer, KV head) spans, cell positions as labels
	MethodSpanUnion   = "span@union"   // one span set for every (layer, KV head), true positions
	// MethodSpanAnchorUnion is span+anchor's request-time row set: one
	// span set for every (layer, KV head) at true positions, as
	// span@union, the spans ranked by the attention the question's
	// queries put on the resident anchors each holds or follows (the lab's
	// per-step MethodSpanAnchor ranks by each decoded token's).
	MethodSpanAnchorUnion = "span+anchor@union"
	// MethodSpanHeadsEven is MethodSpanHeads (per step) with every KV head
	// at the budget's B rows (LongConfig.RetrievalCap at the budget), the
	// split a llama.cpp cell, one position for every head, allows.
	MethodSpanHeadsEven = "span+heads+even"
	// MethodSpanHeadsRequest is MethodSpanHeadsEven's request-time row
	// set: per (layer, KV head) a streaming head's window, or a retrieval
	// head's resident anchors with the spans the question's queries put
	// the most anchor attention on (above the zoom threshold), loaded
	// with label positions as MethodSpanRequest is.
	MethodSpanHeadsRequest = "span+heads@request"
)

// LlamaNeedleConfig is a needle measurement through llama.cpp beside the
// lab's decode loop: Model (lab) and Engine (llama.cpp) must be the same
// weights. With Retrieval set, span+heads is measured in place of span
// and span+anchor: MethodSpanHeads and MethodSpanHeadsEven in the lab
// loop, MethodSpanHeadsRequest on both engines.
type LlamaNeedleConfig struct {
	NeedleConfig
	// Engine is Model's checkpoint loaded in llama.cpp (WriteGGUF).
	Engine *llamacpp.Model
	// Threads are llama.cpp's CPU threads (0: 1).
	Threads int
}

// LlamaNeedleRow is one method on one engine at one budget over the
// needles.
type LlamaNeedleRow struct {
	Budget float64 // 1 for MethodFull
	Method string  // MethodFull, a per-step method (lab only) or a request-time set
	Engine string  // EngineLab or EngineLlama
	// Needles measured; LogProb and Top1 their means, Exact how many
	// were recalled whole.
	Needles       int
	LogProb, Top1 float64
	Exact         int
	// Top1s are the needles' own top-1 per byte, in needle order.
	Top1s []float64
	// Rows is the most context rows of one (layer, KV head), as a share of
	// the context (llama.cpp: cells); Over: more than the budget's rows
	// for some needle.
	Rows float64
	Over bool
	// MaxDiff, for a llama.cpp row, is the largest |logit difference|
	// from the lab decode loop over the same rows, over every needle and
	// decoded token.
	MaxDiff float64
}

// llamaRun is one method's logits on one engine for one needle.
type llamaRun struct {
	budget         float64
	method, engine string
	logits         [][]float32
	rows, limit    float64
	over           bool
	diff           float64
}

// RunLlamaNeedles measures, on the needles RunNeedles builds from the same
// configuration, full KV and span memory at every budget on both engines:
// the lab's per-step span method, and the request-time row set decoded by
// the lab loop and by llama.cpp (an F32 cache, flash attention off). Needles
// whose span memory could not be built are left out and counted.
func RunLlamaNeedles(cfg LlamaNeedleConfig) (rows []LlamaNeedleRow, skipped int, err error) {
	if err := cfg.defaults(); err != nil {
		return nil, 0, err
	}
	m, e := cfg.Model, cfg.Engine
	if e == nil || e.Layers != m.Layers || e.KVHeads != m.KVHeads || e.HeadDim() != m.HeadDim() || e.Vocab != m.Vocab {
		return nil, 0, fmt.Errorf("%w: quality: llama.cpp model does not match the lab model", format.ErrInvalidArgument)
	}
	lc, err := e.NewContext(llamacpp.ContextOptions{Ctx: cfg.Window + 64, Batch: 64, Threads: max(cfg.Threads, 1), Cache: llamacpp.CacheF32})
	if err != nil {
		return nil, 0, err
	}
	defer lc.Close()
	skipped, err = cfg.eachNeedle(func(nd *Needle) error {
		runs, err := cfg.runLlama(lc, nd)
		if err != nil {
			return err
		}
		if rows == nil {
			for _, r := range runs {
				rows = append(rows, LlamaNeedleRow{Budget: r.budget, Method: r.method, Engine: r.engine})
			}
		}
		for j, r := range runs {
			s := scoreNeedle(nd, r.logits)
			row := &rows[j]
			row.Needles++
			row.LogProb += s.LogProb
			row.Top1 += s.Top1
			row.Top1s = append(row.Top1s, s.Top1)
			if s.Exact {
				row.Exact++
			}
			row.Rows = max(row.Rows, r.rows/float64(nd.Context))
			row.Over = row.Over || r.over || r.rows > r.limit
			row.MaxDiff = max(row.MaxDiff, r.diff)
		}
		return nil
	})
	if err != nil {
		return nil, skipped, err
	}
	for j := range rows {
		rows[j].LogProb /= float64(rows[j].Needles)
		rows[j].Top1 /= float64(rows[j].Needles)
	}
	return rows, skipped, nil
}

// runLlama prefills the needle's context with the lab model, builds its
// span memory and decodes the recall line teacher-forced with every
// method on both engines.
func (cfg *LlamaNeedleConfig) runLlama(lc *llamacpp.Context, nd *Needle) ([]llamaRun, error) {
	m := cfg.Model
	ctx, cont := nd.Tokens[:nd.Context], nd.Tokens[nd.Context:]
	n := len(ctx)
	pre, err := m.Forward(ctx, 0, nil, llama.ForwardOptions{})
	if err != nil {
		return nil, err
	}
	h := surprisal(pre, n)
	cache := pre.Cache
	full, err := decode(m, keepRows(cache, allTokens(n)), cont, n)
	if err != nil {
		return nil, err
	}
	all := &llamacpp.Rows{Positions: make([]int32, n)}
	for t := range all.Positions {
		all.Positions[t] = int32(t)
	}
	for _, kv := range cache.Layers {
		all.K, all.V = append(all.K, kv.K), append(all.V, kv.V)
	}
	engFull, err := engineDecode(lc, all, cont, n)
	if err != nil {
		return nil, err
	}
	out := []llamaRun{
		{budget: 1, method: MethodFull, engine: EngineLab, logits: full, rows: float64(n), limit: float64(n)},
		{budget: 1, method: MethodFull, engine: EngineLlama, logits: engFull, rows: float64(n), limit: float64(n), diff: logitsDiff(engFull, full)},
	}
	s, err := newSpanStore(m, cache, h, &cfg.Span)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errSpanBuild, err)
	}
	defer s.close()
	for _, f := range cfg.Budgets {
		b := max(1, int(math.Floor(f*float64(n))))
		if cfg.Retrieval != nil {
			if out, err = cfg.headRuns(out, lc, s, h, cache, nd, f, b); err != nil {
				return nil, err
			}
			continue
		}
		sm := newSpanMethod(s, h, b, cfg.Span.AnchorShare, false)
		step, err := decode(m, sm, cont, n)
		if err != nil {
			return nil, fmt.Errorf("quality: span at %v: %w", f, err)
		}
		out = append(out, llamaRun{budget: f, method: MethodSpan, engine: EngineLab, logits: step,
			rows: max(sm.stats.maxRows, sm.fixedRows), limit: float64(b), over: sm.over})
		q, err := questionQueries(m, cache, sm, cont[:nd.Query])
		if err != nil {
			return nil, err
		}
		for _, meth := range []string{MethodSpanRequest, MethodSpanUnion} {
			build := groupRequestRows
			if meth == MethodSpanUnion {
				build = unionRequestRows
			}
			rows, err := build(sm, q, b)
			if err != nil {
				return nil, fmt.Errorf("quality: %s at %v: %w", meth, f, err)
			}
			if out, err = requestRuns(out, lc, m, rows, cont, n, f, b, meth); err != nil {
				return nil, err
			}
		}
		bs, err := newBoundSpan(s, h, b, cfg.Span.AnchorShare, 0, boundMode{anchorsOnly: true})
		if err != nil {
			return nil, err
		}
		if step, err = decode(m, bs, cont, n); err != nil {
			return nil, fmt.Errorf("quality: %s at %v: %w", MethodSpanAnchor, f, err)
		}
		out = append(out, llamaRun{budget: f, method: MethodSpanAnchor, engine: EngineLab, logits: step,
			rows: max(bs.stats.maxRows, bs.fixedRows), limit: float64(b), over: bs.over})
		best, err := questionAnchorScores(m, keepRows(cache, residentTokens(bs.spanMethod)), n, bs, cont[:nd.Query])
		if err != nil {
			return nil, err
		}
		rows, err := anchorRequestRows(bs, best, b)
		if err != nil {
			return nil, fmt.Errorf("quality: %s at %v: %w", MethodSpanAnchorUnion, f, err)
		}
		if out, err = requestRuns(out, lc, m, rows, cont, n, f, b, MethodSpanAnchorUnion); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// requestRuns appends to out a request-time row set's runs at budget f (b
// rows): the lab decode loop over rows and llama.cpp over the same rows.
func requestRuns(out []llamaRun, lc *llamacpp.Context, m *llama.Model, rows *llamacpp.Rows, cont []int, n int, f float64, b int, meth string) ([]llamaRun, error) {
	lab, err := decode(m, rowsMethod(rows, m.KVHeads, m.HeadDim()), cont, n)
	if err != nil {
		return nil, err
	}
	eng, err := engineDecode(lc, rows, cont, n)
	if err != nil {
		return nil, fmt.Errorf("quality: llama.cpp %s at %v: %w", meth, f, err)
	}
	r := float64(rows.Len())
	return append(out,
		llamaRun{budget: f, method: meth, engine: EngineLab, logits: lab, rows: r, limit: float64(b)},
		llamaRun{budget: f, method: meth, engine: EngineLlama, logits: eng, rows: r, limit: float64(b), diff: logitsDiff(eng, lab)}), nil
}

// headRuns appends span+heads' runs at budget f (b rows per (layer, KV
// head)) for needle nd: the lab loop's per-step MethodSpanHeads, as the
// tables measure it (a retrieval head holding more than b rows, a
// streaming head fewer), and MethodSpanHeadsEven (every head b rows);
// then MethodSpanHeadsEven's request-time rows on both engines.
func (cfg *LlamaNeedleConfig) headRuns(out []llamaRun, lc *llamacpp.Context, s *spanStore, h []float32, cache *llama.Cache, nd *Needle, f float64, b int) ([]llamaRun, error) {
	m, n := cfg.Model, nd.Context
	cont := nd.Tokens[n:]
	var hs *headSplit
	for _, meth := range []string{MethodSpanHeads, MethodSpanHeadsEven} {
		c := cfg.LongConfig
		if meth == MethodSpanHeadsEven {
			c.RetrievalCap = f // a retrieval head at b rows, and so every head
		}
		var err error
		if hs, err = c.headMethod(MethodSpanHeads, s, h, cache, b, nil); err != nil {
			return nil, fmt.Errorf("quality: %s at %v: %w", meth, f, err)
		}
		step, err := decode(m, hs, cont, n)
		if err != nil {
			return nil, fmt.Errorf("quality: %s at %v: %w", meth, f, err)
		}
		out = append(out, llamaRun{budget: f, method: meth, engine: EngineLab, logits: step,
			rows: max(hs.maxRows, hs.fixed), limit: float64(b), over: hs.fixed > float64(b)})
	}
	rows, err := headRequestRows(m, hs, cont[:nd.Query])
	if err != nil {
		return nil, fmt.Errorf("quality: %s at %v: %w", MethodSpanHeadsRequest, f, err)
	}
	return requestRuns(out, lc, m, rows, cont, n, f, b, MethodSpanHeadsRequest)
}

// headRequestRows is MethodSpanHeadsRequest's rows for hs (every head at
// most b rows): a streaming head's window; a retrieval head's resident
// anchors and the spans the question's queries score highest by the
// anchors' attention (questionAnchorScores, the question decoded over
// each head's rows before any zoom), above hs's zoom threshold and within its zoom
// rows per head; every head topped up with the most recent rows it lacks
// to the largest head's count, loaded with label positions
// (llamacpp.SpanGroupRows). Resident rows come as stored, the others from
// their span's factors.
func headRequestRows(m *llama.Model, hs *headSplit, question []int) (*llamacpp.Rows, error) {
	tokens, stored, err := headRequestTokens(m, hs, question)
	if err != nil {
		return nil, err
	}
	return llamacpp.SpanGroupRows(hs.bs.s.r, tokens, stored)
}

// headRequestTokens are headRequestRows' context tokens per (layer, KV
// head), ascending, and per token whether the memory stores its row (the
// others come from their span's factors).
func headRequestTokens(m *llama.Model, hs *headSplit, question []int) (tokens [][]int, stored []bool, err error) {
	if len(question) == 0 {
		return nil, nil, fmt.Errorf("%w: quality: span+heads@request: no question to route", format.ErrInvalidArgument)
	}
	bs := hs.bs
	meta := bs.s.meta
	res := residentTokens(bs.spanMethod)
	before, err := bs.s.keepRows(res)
	if err != nil {
		return nil, nil, err
	}
	for l := range before.sets {
		for g := range before.sets[l] {
			if !hs.retrieval[l*meta.KVHeads+g] {
				before.sets[l][g] = hs.win.sets[l][g]
			}
		}
	}
	best, err := questionAnchorScores(m, before, meta.Tokens, bs, question)
	if err != nil {
		return nil, nil, err
	}
	held := make([][]bool, len(hs.retrieval))
	for gi, r := range hs.retrieval {
		held[gi] = make([]bool, meta.Tokens)
		ts := hs.winTokens
		if r {
			ts = res
			z, err := reconstruct.Select(best[gi:gi+1], []float32{bs.threshold(gi, best[gi])}, bs.rt.SpanTokens, nil,
				reconstruct.Budget{Tokens: bs.zoom / int64(meta.KVHeads), Fill: true})
			if err != nil {
				return nil, nil, err
			}
			for _, sp := range z.Spans[0] {
				for t := meta.Spans[sp].Start; t < meta.Spans[sp].End; t++ {
					held[gi][t] = true
				}
			}
		}
		for _, t := range ts {
			held[gi][t] = true
		}
	}
	return heldTokens(held), storedTokens(meta), nil
}

// heldTokens lists each group's held tokens, ascending, after topping
// every group up with the most recent tokens it lacks to the largest
// group's count (SpanGroupRows loads the same count for every group).
func heldTokens(held [][]bool) [][]int {
	counts := make([]int, len(held))
	c := 0
	for g, hg := range held {
		for _, in := range hg {
			if in {
				counts[g]++
			}
		}
		c = max(c, counts[g])
	}
	tokens := make([][]int, len(held))
	for g, hg := range held {
		for t := len(hg) - 1; t >= 0 && counts[g] < c; t-- {
			if !hg[t] {
				hg[t] = true
				counts[g]++
			}
		}
		tokens[g] = make([]int, 0, c)
		for t, in := range hg {
			if in {
				tokens[g] = append(tokens[g], t)
			}
		}
	}
	return tokens
}

// storedTokens marks the tokens whose rows the memory stores (its
// resident rows, raw spans' included); the others have only factors.
func storedTokens(meta *store.SpanMeta) []bool {
	stored := make([]bool, meta.Tokens)
	for _, t := range meta.Resident {
		stored[t] = true
	}
	return stored
}

// questionAnchorScores is, per (layer, KV head) group and span, the best
// span+anchor score (boundSpan.scores: the attention a query head puts on
// a resident row the span holds or follows) over the question's tokens,
// computed by the lab model attending over inner's rows, after a context
// of n tokens; NaN for a span no resident row raises.
func questionAnchorScores(m *llama.Model, inner method, n int, bs *boundSpan, question []int) ([][]float32, error) {
	rec := &anchorRecorder{inner: inner, bs: bs}
	if _, err := decode(m, rec, question, n); err != nil {
		return nil, err
	}
	return rec.best, nil
}

// anchorRecorder attends as inner does and keeps, per group and span, the
// best anchor score bs gives any step's queries.
type anchorRecorder struct {
	inner method
	bs    *boundSpan
	best  [][]float32
}

func (r *anchorRecorder) rows(a *llama.StepAttention) ([]rowSet, error) {
	sc := r.bs.scores(a)
	if r.best == nil {
		r.best = sc
		return r.inner.rows(a)
	}
	for g, row := range sc {
		for sp, v := range row {
			if cur := r.best[g][sp]; !math.IsNaN(float64(v)) && (math.IsNaN(float64(cur)) || v > cur) {
				r.best[g][sp] = v
			}
		}
	}
	return r.inner.rows(a)
}

// anchorRequestRows is MethodSpanAnchorUnion's rows within b cells: the
// spans by their best score over the groups, as span@union chooses them
// by the routers'.
func anchorRequestRows(bs *boundSpan, best [][]float32, b int) (*llamacpp.Rows, error) {
	return unionRows(bs.spanMethod, b, func(left int64) ([]int, error) {
		u := make([]float32, len(bs.s.meta.Spans))
		for sp := range u {
			u[sp] = float32(math.NaN())
			for g := range best {
				if v := best[g][sp]; !math.IsNaN(float64(v)) && !(v <= u[sp]) {
					u[sp] = v
				}
			}
		}
		if left <= 0 {
			return nil, nil
		}
		z, err := reconstruct.Select([][]float32{u}, []float32{float32(math.Inf(-1))}, bs.rt.SpanTokens, nil,
			reconstruct.Budget{Tokens: left, Fill: true})
		if err != nil {
			return nil, err
		}
		return z.Spans[0], nil
	})
}

// questionQueries are the question's pre-RoPE queries per (layer, KV
// head) group, its query heads' at every question token, computed by the
// lab model attending over sm's resident rows alone.
func questionQueries(m *llama.Model, cache *llama.Cache, sm *spanMethod, question []int) ([][]float32, error) {
	rec := &queryRecorder{inner: keepRows(cache, residentTokens(sm)), kvHeads: m.KVHeads, hd: m.HeadDim(), q: make([][]float32, m.Layers*m.KVHeads)}
	if _, err := decode(m, rec, question, cache.Len()); err != nil {
		return nil, err
	}
	return rec.q, nil
}

func residentTokens(sm *spanMethod) []int {
	var res []int
	for t, r := range sm.resident {
		if r {
			res = append(res, t)
		}
	}
	return res
}

// groupRequestRows is MethodSpanRequest's rows at b rows per (layer, KV
// head).
func groupRequestRows(sm *spanMethod, q [][]float32, b int) (*llamacpp.Rows, error) {
	spans, err := llamacpp.GroupSpans(&sm.rt, int64(sm.s.meta.Tokens), q, int64(b-len(residentTokens(sm))))
	if err != nil {
		return nil, err
	}
	held := make([][]bool, len(spans))
	for g, sps := range spans {
		held[g] = slices.Clone(sm.resident)
		for _, sp := range sps {
			info := sm.s.meta.Spans[sp]
			for t := info.Start; t < info.End; t++ {
				held[g][t] = true
			}
		}
	}
	return llamacpp.SpanGroupRows(sm.s.r, heldTokens(held), storedTokens(sm.s.meta))
}

// unionRequestRows is MethodSpanUnion's rows within b cells.
func unionRequestRows(sm *spanMethod, q [][]float32, b int) (*llamacpp.Rows, error) {
	return unionRows(sm, b, func(left int64) ([]int, error) {
		return llamacpp.RequestSpans(&sm.rt, int64(sm.s.meta.Tokens), q, left)
	})
}

// unionRows is sm's resident rows, the context's last row and the spans
// choose picks within the cells left of b, at their true positions.
func unionRows(sm *spanMethod, b int, choose func(left int64) ([]int, error)) (*llamacpp.Rows, error) {
	n := len(sm.resident)
	recon := make([]bool, n)
	exact := slices.Clone(sm.resident)
	add := func(t int) { // a token not resident on the GPU, from the store
		switch {
		case sm.resident[t]:
		case sm.s.meta.Spans[spanOf(sm.s.meta, t)].Factored:
			recon[t] = true
		default: // an unfactored span's row (raw zoom): stored exact
			exact[t] = true
		}
	}
	left := b - len(residentTokens(sm))
	if !sm.resident[n-1] {
		add(n - 1)
		left--
	}
	spans, err := choose(int64(left))
	if err != nil {
		return nil, err
	}
	for _, sp := range spans {
		info := sm.s.meta.Spans[sp]
		for t := info.Start; t < info.End; t++ {
			add(t)
		}
	}
	return llamacpp.SpanRows(sm.s.r, exact, recon)
}

// queryRecorder attends as inner does and keeps every step's pre-RoPE
// queries, per (layer, KV head) group its query heads'.
type queryRecorder struct {
	inner       method
	kvHeads, hd int
	q           [][]float32
}

func (r *queryRecorder) rows(a *llama.StepAttention) ([]rowSet, error) {
	per := len(a.QPre) / r.hd / r.kvHeads
	for g := range r.kvHeads {
		gi := a.Layer*r.kvHeads + g
		r.q[gi] = append(r.q[gi], a.QPre[g*per*r.hd:(g+1)*per*r.hd]...)
	}
	return r.inner.rows(a)
}

// rowsMethod is the lab method attending over rows at every step.
func rowsMethod(rows *llamacpp.Rows, kvHeads, hd int) *fixedRows {
	n := rows.Len()
	f := &fixedRows{sets: make([][]rowSet, len(rows.K))}
	for l := range rows.K {
		f.sets[l] = make([]rowSet, kvHeads)
		for g := range kvHeads {
			f.sets[l][g] = rowSet{k: rows.K[l][g*n*hd : (g+1)*n*hd], v: rows.V[l][g*n*hd : (g+1)*n*hd]}
		}
	}
	return f
}

// engineDecode loads rows into sequence 0 of lc and decodes cont
// teacher-forced at positions n, n+1, ..., one token per llama_decode,
// returning the logits after each.
func engineDecode(lc *llamacpp.Context, rows *llamacpp.Rows, cont []int, n int) ([][]float32, error) {
	if err := llamacpp.LoadRows(lc, 0, rows); err != nil {
		return nil, err
	}
	out := make([][]float32, len(cont))
	for i, tok := range cont {
		if err := lc.Decode(0, n+i, []int32{int32(tok)}); err != nil {
			return nil, err
		}
		out[i] = lc.Logits()
	}
	return out, nil
}

// logitsDiff is the largest |a - b| over every step's logits.
func logitsDiff(a, b [][]float32) float64 {
	d := 0.0
	for i := range a {
		for j := range a[i] {
			d = max(d, math.Abs(float64(a[i][j]-b[i][j])))
		}
	}
	return d
}

// WriteGGUF converts a llama2.c checkpoint (lab/llama's format) to GGUF
// (gguf.WriteLlama2c) in dir and returns the file's path.
func WriteGGUF(checkpoint, dir string) (string, error) {
	ck, err := os.ReadFile(checkpoint)
	if err != nil {
		return "", fmt.Errorf("quality: %w", err)
	}
	var buf bytes.Buffer
	name := filepath.Base(checkpoint)
	if _, err := gguf.WriteLlama2c(&buf, ck, name); err != nil {
		return "", fmt.Errorf("quality: gguf of %s: %w", checkpoint, err)
	}
	p := filepath.Join(dir, name+".gguf")
	if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
		return "", fmt.Errorf("quality: %w", err)
	}
	return p, nil
}
