package quality

import (
	"fmt"
	"math"
	"slices"

	"github.com/kvstore/kvstore/lab/llama"
	"github.com/kvstore/kvstore/reconstruct"
)

// Routing signals BoundWhy compares, each scoring every factored span of
// a (layer, KV head) at a decode step.
var WhySignals = []string{"oracle", "router", "bound", "bound-raw", "bound-ch", "maxkey", "meankey"}

// whyCost is each signal's rows per span counted in the budget's fixed
// rows: the oracle and the router's (the stored summary keys, as the span
// method counts them) none, a bound one K+V row, a key half of one.
var whyCost = map[string]float64{"oracle": 0, "router": 0, "bound": 1, "bound-raw": 1, "bound-ch": 0 /* boundMode.cost */, "maxkey": 0.5, "meankey": 0.5}

// WhyRow is one signal at one budget over a set of needles, at the steps
// that predict the value's bytes, the model attending over the full
// context (the teacher's states, so that every signal routes the same
// queries).
type WhyRow struct {
	Budget float64
	Signal string
	// Spans is the mean number of spans with rows to zoom; Zoom the mean
	// zoom rows per layer (over its KV heads) at the span method's budget,
	// OwnZoom at the signal's own (its per-span cost counted).
	Spans, Zoom, OwnZoom float64
	// Captured is, per needle, the share of the teacher's attention mass
	// on the zoomable spans that the signal's zoom set holds at the span
	// method's zoom budget (the ranking alone), mean over the value's
	// steps and the layers; OwnCaptured at the signal's own budget.
	Captured, OwnCaptured []float64
	// Rank is, at each value step and layer where the teacher's attention
	// puts the most mass on the needle's span (of every span) in some KV
	// head, the rank (1: first) the signal gives that span there.
	Rank []float64
}

// BoundWhy measures, on cfg's needles, why a routing signal does or does
// not find the needle: for each signal of WhySignals at each budget, the
// teacher's attention mass its zoom set captures and the rank it gives
// the span that holds the value.
func BoundWhy(cfg NeedleConfig) (rows []WhyRow, skipped int, err error) {
	if err := cfg.defaults(); err != nil {
		return nil, 0, err
	}
	for _, f := range cfg.Budgets {
		for _, s := range WhySignals {
			rows = append(rows, WhyRow{Budget: f, Signal: s})
		}
	}
	skipped, err = cfg.eachNeedle(func(nd *Needle) error { return cfg.why(nd, rows) })
	return rows, skipped, err
}

// whyBudget is one budget's span methods for BoundWhy.
type whyBudget struct {
	sm     *spanMethod
	bs     *boundSpan
	bsCh   *boundSpan    // bounds on cfg's BoundChannels
	maxKey [][][]float32 // per group and span, the largest-norm key; nil: no rows
	meanK  [][][]float32 // per group and span, the mean key
	zoom   map[string]int64
}

func (c *NeedleConfig) why(nd *Needle, rows []WhyRow) error {
	m := c.Model
	ctx, cont := nd.Tokens[:nd.Context], nd.Tokens[nd.Context:]
	n := len(ctx)
	pre, err := m.Forward(ctx, 0, nil, llama.ForwardOptions{})
	if err != nil {
		return err
	}
	h := surprisal(pre, n)
	s, err := newSpanStore(m, pre.Cache, h, &c.Span)
	if err != nil {
		return fmt.Errorf("%w: %w", errSpanBuild, err)
	}
	defer s.close()
	meta, hd := s.meta, s.hd
	needleSpan := spanOf(meta, valueAt(nd))
	var bud []*whyBudget
	for _, f := range c.Budgets {
		b := max(1, int(math.Floor(f*float64(n))))
		wb := &whyBudget{sm: newSpanMethod(s, h, b, c.Span.AnchorShare, false), zoom: map[string]int64{}}
		if wb.bs, err = newBoundSpan(s, h, b, c.Span.AnchorShare, 0, boundMode{}); err != nil {
			return err
		}
		if wb.bsCh, err = newBoundSpan(s, h, b, c.Span.AnchorShare, 0, boundMode{channels: c.boundChannels()}); err != nil {
			return err
		}
		anchors := float64(len(wb.sm.resIdx))
		for sig, cost := range whyCost {
			left := float64(b) - anchors - cost*float64(wb.bs.bounded)
			if sig == "bound-ch" {
				perSpan, fixed := boundMode{channels: c.boundChannels()}.cost(hd)
				left = float64(b) - anchors - fixed - perSpan*float64(wb.bs.bounded)
			}
			wb.zoom[sig] = max(0, int64(math.Floor(left))) * int64(meta.KVHeads)
		}
		groups := meta.Layers * meta.KVHeads
		wb.maxKey, wb.meanK = make([][][]float32, groups), make([][][]float32, groups)
		for gi := range groups {
			wb.maxKey[gi], wb.meanK[gi] = make([][]float32, len(meta.Spans)), make([][]float32, len(meta.Spans))
			for sp, info := range meta.Spans {
				if wb.bs.lo[gi][sp] == nil {
					continue
				}
				rec, err := s.span(gi/meta.KVHeads, gi%meta.KVHeads, sp)
				if err != nil {
					return err
				}
				mean, best, bestNorm := make([]float32, hd), []float32(nil), -1.0
				var cnt float32
				for t := info.Start; t < info.End; t++ {
					if wb.sm.resident[t] {
						continue
					}
					k := rec.k[(t-info.Start)*hd : (t-info.Start+1)*hd]
					if nrm := dot64(k, k); nrm > bestNorm {
						best, bestNorm = k, nrm
					}
					for j, v := range k {
						mean[j] += v
					}
					cnt++
				}
				for j := range mean {
					mean[j] /= cnt
				}
				wb.maxKey[gi][sp], wb.meanK[gi][sp] = best, mean
			}
		}
		bud = append(bud, wb)
	}
	w := &whyMethod{fixedRows: keepRows(pre.Cache, allTokens(n)), t: newTeacher(m, pre.Cache, meta), s: s, n: n,
		first: nd.Query - 1, last: nd.Query + nd.ValueLen - 2, needleSpan: needleSpan, bud: bud}
	w.captured = make([][]float64, len(rows))
	w.owned = make([][]float64, len(rows))
	w.ranks = make([][]float64, len(rows))
	if _, err := decode(m, w, cont, n); err != nil {
		return err
	}
	for i := range rows {
		r := &rows[i]
		wb := bud[i/len(WhySignals)]
		r.Captured = append(r.Captured, Mean(w.captured[i]))
		r.OwnCaptured = append(r.OwnCaptured, Mean(w.owned[i]))
		r.Rank = append(r.Rank, w.ranks[i]...)
		k := float64(len(r.Captured))
		r.Spans += (float64(wb.bs.bounded) - r.Spans) / k
		r.Zoom += (float64(wb.zoom["oracle"])/float64(meta.KVHeads) - r.Zoom) / k
		r.OwnZoom += (float64(wb.zoom[r.Signal])/float64(meta.KVHeads) - r.OwnZoom) / k
	}
	return nil
}

// valueAt is the context position of the recalled definition's value.
func valueAt(nd *Needle) int {
	val := nd.Tokens[nd.Context+nd.Query : nd.Context+nd.Query+nd.ValueLen]
	ctx := nd.Tokens[:nd.Context]
	for p := range len(ctx) - len(val) {
		if ctx[p] == '"' && slices.Equal(ctx[p+1:p+1+len(val)], val) {
			return p + 1
		}
	}
	return 0
}

// whyMethod attends over the full context and, at the value's steps,
// scores every signal.
type whyMethod struct {
	*fixedRows
	t           *teacher
	s           *spanStore
	n           int
	first, last int // the steps predicting the value's bytes
	needleSpan  int
	bud         []*whyBudget
	// per row of BoundWhy (budget-major, then signal): captured shares
	// and ranks
	captured, owned, ranks [][]float64
}

func (w *whyMethod) rows(a *llama.StepAttention) ([]rowSet, error) {
	mass := w.t.mass(a)
	if step := int(a.Pos) - w.n; step < w.first || step > w.last {
		return w.fixedRows.rows(a)
	}
	meta, hd := w.s.meta, w.s.hd
	kv := meta.KVHeads
	groups := meta.Layers * kv
	scale := 1 / math.Sqrt(float64(hd))
	per := len(a.Q) / hd / kv
	for bi, wb := range w.bud {
		bound, boundCh := wb.bs.scores(a), wb.bsCh.scores(a)
		for si, sig := range WhySignals {
			scores := make([][]float32, groups)
			for gi := range scores {
				scores[gi] = nanScores(len(meta.Spans))
			}
			for g := range kv {
				gi := a.Layer*kv + g
				switch sig {
				case "oracle":
					for sp := range meta.Spans {
						if wb.bs.lo[gi][sp] != nil {
							scores[gi][sp] = float32(mass[g][sp])
						}
					}
				case "router":
					r, err := w.s.rt.Score(gi, a.Pos, a.QPre[g*per*hd:(g+1)*per*hd], nil)
					if err != nil {
						return nil, err
					}
					for sp := range meta.Spans {
						if wb.bs.lo[gi][sp] != nil {
							scores[gi][sp] = r[sp]
						}
					}
				case "bound":
					copy(scores[gi], bound[gi])
				case "bound-ch":
					copy(scores[gi], boundCh[gi])
				default:
					nr := len(meta.Resident)
					for h := g * per; h < (g+1)*per; h++ {
						q := a.Q[h*hd : (h+1)*hd]
						l := make([]float64, len(meta.Spans))
						for sp := range l {
							l[sp] = math.NaN()
							switch {
							case wb.bs.lo[gi][sp] == nil:
							case sig == "bound-raw":
								l[sp] = keyBound(q, wb.bs.lo[gi][sp], wb.bs.hi[gi][sp]) * scale
							case sig == "maxkey":
								l[sp] = dot64(q, wb.maxKey[gi][sp]) * scale
							case sig == "meankey":
								l[sp] = dot64(q, wb.meanK[gi][sp]) * scale
							}
						}
						if sig != "bound-raw" {
							// On the share scale, as the bound's: over the
							// resident rows' logits and the spans'.
							var res []float64
							for _, i := range wb.sm.resIdx {
								res = append(res, dot64(q, w.s.resK[a.Layer][(g*nr+i)*hd:(g*nr+i+1)*hd])*scale)
							}
							shares(l, res)
						}
						for sp, v := range l {
							if !math.IsNaN(v) && (math.IsNaN(float64(scores[gi][sp])) || float32(v) > scores[gi][sp]) {
								scores[gi][sp] = float32(v)
							}
						}
					}
				}
			}
			i := bi*len(WhySignals) + si
			for _, own := range []bool{false, true} {
				z := wb.zoom["oracle"]
				if own {
					z = wb.zoom[sig]
				}
				zs, err := reconstruct.Select(scores, noTau(groups), wb.sm.rt.SpanTokens, nil, reconstruct.Budget{Tokens: z, Fill: true})
				if err != nil {
					return nil, err
				}
				var got, all float64
				for g := range kv {
					gi := a.Layer*kv + g
					for sp := range meta.Spans {
						if wb.bs.lo[gi][sp] != nil {
							all += mass[g][sp]
						}
					}
					for _, sp := range zs.Spans[gi] {
						got += mass[g][sp]
					}
				}
				if own {
					w.owned[i] = append(w.owned[i], got/all)
				} else {
					w.captured[i] = append(w.captured[i], got/all)
				}
			}
			// The needle's span's rank in the KV head where it has the most
			// mass, if the teacher puts more on it there than on any other.
			best := 0
			for g := range kv {
				if mass[g][w.needleSpan] > mass[best][w.needleSpan] {
					best = g
				}
			}
			gi := a.Layer*kv + best
			if v := scores[gi][w.needleSpan]; !math.IsNaN(float64(v)) && llama.Argmax(mass[best]) == w.needleSpan {
				rank := 1
				for _, o := range scores[gi] {
					if o > v {
						rank++
					}
				}
				w.ranks[i] = append(w.ranks[i], float64(rank))
			}
		}
	}
	return w.fixedRows.rows(a)
}

// shares turns the span logits l (NaN: none) into exp(l - lse), lse the
// log-sum-exp of l's and res's.
func shares(l, res []float64) {
	mx := math.Inf(-1)
	for _, v := range append(slices.Clone(res), l...) {
		if !math.IsNaN(v) {
			mx = max(mx, v)
		}
	}
	var z float64
	for _, v := range append(slices.Clone(res), l...) {
		if !math.IsNaN(v) {
			z += math.Exp(v - mx)
		}
	}
	for i, v := range l {
		if !math.IsNaN(v) {
			l[i] = math.Exp(v-mx) / z
		}
	}
}

func nanScores(n int) []float32 {
	s := make([]float32, n)
	for i := range s {
		s[i] = float32(math.NaN())
	}
	return s
}
