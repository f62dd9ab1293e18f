package quality

import (
	"fmt"
	"math"

	"github.com/kvstore/kvstore/lab/llama"
)

// Report is the result of Run.
type Report struct {
	Name                     string
	Layers, KVHeads, HeadDim int
	Context, Continuation    int
	Spans, Factored, Anchors int
	MeanSpan                 float64
	Ranks                    []RankRow
	Heads                    []HeadRank // per (layer, KV head), whole context
	Rows                     []Row
	FullMatchesForward       bool // the decode loop's full attention is Forward's, bit for bit
	// ProjDim is d'. StoredRankK and StoredRankV are the mean ranks the
	// stored factors got (energy threshold, r_max); FactorShare is their
	// bytes (K and V) over the raw bytes of the factored spans' rows in
	// the factors' dtype.
	ProjDim                  int
	StoredRankK, StoredRankV float64
	FactorShare              float64
}

// Row is one method at one budget.
type Row struct {
	Budget float64
	Method string // "window", "top-surprisal", "span", "span+sum"
	// KL is the mean KL(p_full || p_method) over the continuation, in nats;
	// Top1 the share of steps whose argmax matches full attention's.
	KL, Top1 float64
	// Rows is the mean GPU rows per (layer, KV head) used, as a fraction of
	// the context; Bytes the mean factor bytes zoomed in per step (all
	// layers and heads).
	Rows, Bytes float64
	// OverBudget: the method's fixed rows alone exceed the budget (the
	// result is then for more memory than the others had).
	OverBudget bool
}

// Method names of Row.
const (
	MethodWindow  = "window"
	MethodTop     = "top-surprisal"
	MethodSpan    = "span"
	MethodSpanSum = "span+sum"
)

// Run measures one configuration: it samples a context and continuation
// from the model (or takes them from cfg.Text), prefills the context, stores its span memory, and runs
// the rank sweep and every method at every budget.
func Run(cfg Config) (*Report, error) {
	cfg.ensureDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	m, n := cfg.Model, cfg.Context
	toks, err := text(m, cfg.Text, cfg.BOS, n+cfg.Continuation, cfg.Seed)
	if err != nil {
		return nil, err
	}
	ctx, cont := toks[:n], toks[n:]
	pre, err := m.Forward(ctx, 0, nil, llama.ForwardOptions{})
	if err != nil {
		return nil, err
	}
	h := surprisal(pre, n)
	cache := pre.Cache
	rep := &Report{Name: cfg.Name, Layers: m.Layers, KVHeads: m.KVHeads, HeadDim: m.HeadDim(), Context: n, Continuation: len(cont)}
	full, err := decode(m, keepRows(cache, allTokens(n)), cont, n)
	if err != nil {
		return nil, err
	}
	if rep.FullMatchesForward, err = matchesForward(m, cache, cont, n, full); err != nil {
		return nil, err
	}
	s, err := newSpanStore(m, cache, h, &cfg)
	if err != nil {
		return nil, err
	}
	defer s.close()
	if err := rep.describe(s, cfg.FactorDType.Size()); err != nil {
		return nil, err
	}
	if rep.Heads, err = headRanks(cache); err != nil {
		return nil, err
	}
	if rep.Ranks, err = rankErrors(cache, s.meta.Spans, cfg.Ranks); err != nil {
		return nil, err
	}
	for _, f := range cfg.Budgets {
		rows, err := runBudget(m, cache, h, s, &cfg, f, cont, full)
		if err != nil {
			return nil, fmt.Errorf("quality: budget %v: %w", f, err)
		}
		rep.Rows = append(rep.Rows, rows...)
	}
	return rep, nil
}

// matchesForward checks the decode loop's full attention against Forward.
func matchesForward(m *llama.Model, c *llama.Cache, cont []int, n int, full [][]float32) (bool, error) {
	res, err := m.Forward(cont, int64(n), c.Clone(), llama.ForwardOptions{})
	if err != nil {
		return false, err
	}
	for i, l := range res.Logits {
		for j, v := range l {
			if math.Float32bits(v) != math.Float32bits(full[i][j]) {
				return false, nil
			}
		}
	}
	return true, nil
}

func (r *Report) describe(s *spanStore, elem int) error {
	meta := s.meta
	r.Spans, r.Anchors, r.ProjDim = len(meta.Spans), len(meta.Anchors), meta.ProjDim
	r.MeanSpan = float64(meta.Tokens) / float64(len(meta.Spans))
	var blocks, factorBytes, rawBytes float64
	for l := range meta.Layers {
		for g := range meta.KVHeads {
			h, err := s.r.Head(l, g)
			if err != nil {
				return err
			}
			for sp, info := range meta.Spans {
				if !info.Factored {
					continue
				}
				blocks++
				r.StoredRankK += float64(h.K[sp].Rank)
				r.StoredRankV += float64(h.V[sp].Rank)
				factorBytes += float64(h.K[sp].Length + h.V[sp].Length)
				rawBytes += float64(2 * info.Len() * meta.HeadDim * elem)
			}
		}
	}
	for _, sp := range meta.Spans {
		if sp.Factored {
			r.Factored++
		}
	}
	if blocks > 0 {
		r.StoredRankK /= blocks
		r.StoredRankV /= blocks
		r.FactorShare = factorBytes / rawBytes
	}
	return nil
}

// runBudget runs every method at budget f.
func runBudget(m *llama.Model, c *llama.Cache, h []float32, s *spanStore, cfg *Config, f float64, cont []int, full [][]float32) ([]Row, error) {
	n := cfg.Context
	b := max(1, int(math.Floor(f*float64(n))))
	var out []Row
	for _, fixed := range []struct {
		name   string
		tokens []int
	}{{MethodWindow, windowTokens(n, b)}, {MethodTop, topSurprisal(h, b)}} {
		logits, err := decode(m, keepRows(c, fixed.tokens), cont, n)
		if err != nil {
			return nil, err
		}
		row := score(full, logits)
		row.Budget, row.Method, row.Rows = f, fixed.name, float64(len(fixed.tokens))/float64(n)
		out = append(out, row)
	}
	for _, sum := range []bool{false, true} {
		sm := newSpanMethod(s, h, b, cfg.AnchorShare, sum)
		logits, err := decode(m, sm, cont, n)
		if err != nil {
			return nil, err
		}
		row := score(full, logits)
		row.Budget, row.Method, row.OverBudget = f, MethodSpan, sm.over
		if sum {
			row.Method = MethodSpanSum
		}
		rows, bytes := sm.usage(len(cont))
		row.Rows, row.Bytes = rows/float64(n), bytes
		out = append(out, row)
	}
	return out, nil
}

// score compares a method's logits with full attention's.
func score(full, got [][]float32) Row {
	var r Row
	for i := range full {
		r.KL += llama.LogitsKL(full[i], got[i])
		if llama.LogitsArgmax(full[i]) == llama.LogitsArgmax(got[i]) {
			r.Top1++
		}
	}
	r.KL /= float64(len(full))
	r.Top1 /= float64(len(full))
	return r
}
