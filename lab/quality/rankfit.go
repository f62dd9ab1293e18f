package quality

import (
	"fmt"
	"math"
	"slices"

	"gonum.org/v1/gonum/floats"
	"gonum.org/v1/gonum/mat"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/lab/llama"
	"github.com/kvstore/kvstore/lab/router"
)

// MethodSpanHeadsFit ranks MethodSpanHeads' zoom (below LongConfig.ZoomGate
// only, when set) by a ranker fitted to the teacher: per retrieval (layer,
// KV head) a logistic model of what the memory holds at a step (the
// anchors' attention on and near the span, its distance from the query,
// its rows, its mean key's logit: half a K+V row per span, counted in the
// retrieval heads' rows), its weights fitted by the zoom BCE against the
// teacher's attention mass per span on training text (FitRank,
// LongConfig.RankFit).
const MethodSpanHeadsFit = "span+heads+fit"

// The ranker's features of a span at a step, in order:
//
//	1                          bias
//	ln max(score, floor)       the anchors' attention on the span (boundSpan.scores)
//	[no anchor near the span]  its score is NaN: no resident row in it or right before it
//	ln(1 + distance)           rows from the span's end to the query's position
//	ln(1 + distance)^2
//	ln rows                    the rows a zoom adds
//	ln max(best, floor)        the KV head's best anchor score at the step
//	ln max(mass, floor)        the anchors' attention mass near the span (spanEstimates)
//	max(mean, -50)             the span's mean key's logit against the resident rows' (spanEstimates)
const (
	rankFeatures = 9
	rankFloor    = 1e-6
)

// RankFeatures name the fitted ranker's features, in RankFit.W's order.
var RankFeatures = [rankFeatures]string{"1", "ln score", "no anchor", "ln(1+distance)", "ln(1+distance)^2", "ln rows", "ln best score", "ln anchor mass", "mean-key logit"}

// spanFeatures writes span sp's features at a step of a KV head whose
// spans' anchor scores are scores (best: their largest) into f.
func spanFeatures(f []float64, score, best float32, mass, mean float64, distance, rows int) {
	noAnchor := 0.0
	if math.IsNaN(float64(score)) {
		score, noAnchor = 0, 1
	}
	d := math.Log1p(float64(max(0, distance)))
	f[0] = 1
	f[1] = math.Log(max(float64(score), rankFloor))
	f[2] = noAnchor
	f[3] = d
	f[4] = d * d
	f[5] = math.Log(float64(max(1, rows)))
	f[6] = math.Log(max(float64(best), rankFloor))
	f[7] = math.Log(max(mass, rankFloor))
	f[8] = max(mean, -50)
}

// spanEstimates are, per KV head of the step's layer and span, two
// estimates of the teacher's mass that boundSpan.scores computes from the
// resident logits it already has: mass, the attention the head's query
// heads put on the resident rows in the span or right before it
// (boundSpan.near), a softmax over the resident rows averaged over the
// query heads; and mean, for a span with a mean key (boundSpan.mean), the
// largest over the query heads of its logit less the log-sum-exp of the
// resident rows' (-Inf for the others).
type spanEstimates struct {
	mass, mean [][]float64
}

func newSpanEstimates(kvHeads, spans int) *spanEstimates {
	e := &spanEstimates{mass: make([][]float64, kvHeads), mean: make([][]float64, kvHeads)}
	for g := range e.mass {
		e.mass[g], e.mean[g] = make([]float64, spans), make([]float64, spans)
	}
	return e
}

// reset clears KV head g's estimates before a step's query heads add to
// them.
func (e *spanEstimates) reset(g int) {
	clear(e.mass[g])
	for sp := range e.mean[g] {
		e.mean[g][sp] = math.Inf(-1)
	}
}

// add is one query head q (of per for KV head g) with resident logits
// whose largest is mx and whose sum of exp(logit - mx) is z.
func (e *spanEstimates) add(g, per int, logits []float64, mx, z float64, near [][2]int, q []float32, meanKeys [][]float32, scale float64) {
	for j, l := range logits {
		p := math.Exp(l-mx) / z / float64(per)
		for _, sp := range near[j] {
			if sp >= 0 {
				e.mass[g][sp] += p
			}
		}
	}
	lse := mx + math.Log(z)
	for sp, k := range meanKeys {
		if k != nil {
			e.mean[g][sp] = max(e.mean[g][sp], dot64(q, k)*scale-lse)
		}
	}
}

// RankFit is the fitted ranker of MethodSpanHeadsFit: per (layer, KV head)
// (index layer*KVHeads+head) its weights over the features above, nil for
// a head it does not rank.
type RankFit struct {
	W [][]float64
	// Samples and Loss are per head the (step, span) pairs it was fitted
	// on and its mean BCE; Base the mean BCE of the best constant, Floor
	// the targets' own (their entropy: the least any ranker can reach).
	Samples           []int
	Loss, Base, Floor []float64
}

// rankData is the training set FitRank fits: per (layer, KV head) the
// features of every (step, span) seen, rankFeatures per sample, and the
// teacher's mass of each.
type rankData struct {
	x, y [][]float64
}

func newRankData(groups int) *rankData {
	return &rankData{x: make([][]float64, groups), y: make([][]float64, groups)}
}

// spanFeatureRows are, per KV head of a's layer that bs ranks at the step
// (a retrieval head whose best anchor score is below the gate, when one is
// set), the features of its zoomable spans, rankFeatures each, and which
// spans they are; nil for the heads it does not rank.
func spanFeatureRows(bs *boundSpan, a *llama.StepAttention, anchors [][]float32) (x [][]float64, spans [][]int) {
	meta := bs.s.meta
	x, spans = make([][]float64, meta.KVHeads), make([][]int, meta.KVHeads)
	if anchors == nil {
		return x, spans
	}
	for g := range meta.KVHeads {
		gi := a.Layer*meta.KVHeads + g
		mx := best(anchors[gi])
		if !bs.heads[gi] || bs.gate > 0 && mx >= bs.gate {
			continue
		}
		mass, mean := bs.est.mass[g], bs.est.mean[g]
		for sp, info := range meta.Spans {
			if bs.rt.SpanTokens[sp] == 0 {
				continue
			}
			x[g] = append(x[g], make([]float64, rankFeatures)...)
			spanFeatures(x[g][len(x[g])-rankFeatures:], anchors[gi][sp], mx, mass[sp], mean[sp], int(a.Pos)-info.End, bs.rt.SpanTokens[sp])
			spans[g] = append(spans[g], sp)
		}
	}
	return x, spans
}

// rankMeanCost is the rows a span's mean key costs a retrieval head of
// MethodSpanHeadsFit: half a K+V row.
const rankMeanCost = 0.5

// meanKeys sets bs.mean, each span's mean key post-RoPE, on the retrieval
// heads (the ranker's last feature).
func meanKeys(bs *boundSpan) error {
	meta := bs.s.meta
	for gi, r := range bs.heads {
		if !r {
			continue
		}
		for sp, info := range meta.Spans {
			if !bs.s.zoomable(sp) || bs.rt.SpanTokens[sp] == 0 {
				continue
			}
			_, _, mk, err := bs.keyStats(gi, sp, info)
			if err != nil {
				return err
			}
			bs.mean[gi][sp] = mk
		}
	}
	return nil
}

// fitRanker is MethodSpanHeadsFit's ranker of bs: the fitted one, or the
// collector of its training set while FitRank runs. It sets the mean keys
// the ranker reads.
func (c *LongConfig) fitRanker(bs *boundSpan, cache *llama.Cache) (spanRanker, error) {
	switch {
	case c.rankData == nil && c.RankFit == nil:
		return nil, fmt.Errorf("%w: quality: %s without a fitted ranker", format.ErrInvalidArgument, MethodSpanHeadsFit)
	case c.rankData == nil && len(c.RankFit.W) != len(c.Retrieval):
		return nil, fmt.Errorf("%w: quality: %s: a fitted ranker of %d KV heads for %d", format.ErrInvalidArgument, MethodSpanHeadsFit, len(c.RankFit.W), len(c.Retrieval))
	}
	if err := meanKeys(bs); err != nil {
		return nil, err
	}
	bs.est = newSpanEstimates(bs.s.meta.KVHeads, len(bs.s.meta.Spans))
	if c.rankData != nil {
		return &rankCollect{bs: bs, t: newTeacher(c.Model, cache, bs.s.meta), data: c.rankData}, nil
	}
	return &rankFitted{bs: bs, fit: c.RankFit}, nil
}

// rankCollect gathers FitRank's training set while the anchors route: at
// every step the teacher's mass of each span that the fitted ranker would
// score.
type rankCollect struct {
	bs   *boundSpan
	t    *teacher
	data *rankData
}

func (r *rankCollect) rank(a *llama.StepAttention, anchors [][]float32) ([][]float64, error) {
	x, spans := spanFeatureRows(r.bs, a, anchors)
	if !slices.ContainsFunc(spans, func(s []int) bool { return len(s) > 0 }) {
		r.t.keep(a) // at every step and layer: the teacher keeps each key
		return nil, nil
	}
	mass := r.t.mass(a)
	kv := r.bs.s.meta.KVHeads
	for g := range x {
		gi := a.Layer*kv + g
		r.data.x[gi] = append(r.data.x[gi], x[g]...)
		for _, sp := range spans[g] {
			r.data.y[gi] = append(r.data.y[gi], mass[g][sp])
		}
	}
	return nil, nil
}

// rankFitted scores spans by the fitted ranker: router.Sigmoid(w . features).
type rankFitted struct {
	bs  *boundSpan
	fit *RankFit
}

func (r *rankFitted) rank(a *llama.StepAttention, anchors [][]float32) ([][]float64, error) {
	meta := r.bs.s.meta
	x, spans := spanFeatureRows(r.bs, a, anchors)
	out := make([][]float64, meta.KVHeads)
	for g := range out {
		out[g] = make([]float64, len(meta.Spans))
		for sp := range out[g] {
			out[g][sp] = math.NaN()
		}
		w := r.fit.W[a.Layer*meta.KVHeads+g]
		if len(spans[g]) > 0 && len(w) != rankFeatures {
			return nil, fmt.Errorf("%w: quality: fitted ranker of layer %d, KV head %d: %d weights, want %d", format.ErrInvalidArgument, a.Layer, g, len(w), rankFeatures)
		}
		for i, sp := range spans[g] {
			out[g][sp] = router.Sigmoid(floats.Dot(w, x[g][i*rankFeatures:(i+1)*rankFeatures]))
		}
	}
	return out, nil
}

// FitRank fits MethodSpanHeadsFit's ranker on training text: the needles
// of needles and the windows of text (either may be nil; their
// LongConfigs' Retrieval, budgets and zoom settings are those the ranker
// is fitted under), decoded by MethodSpanHeads, which the anchors'
// attention routes, the teacher's mass of every span recorded at every
// step the ranker would score.
func FitRank(needles *NeedleConfig, text *LongTextConfig) (*RankFit, error) {
	var data *rankData
	// collect runs run with lc set to gather into data.
	collect := func(lc *LongConfig, run func() error) error {
		if lc.Model == nil || lc.Retrieval == nil {
			return fmt.Errorf("%w: quality: rank fit without a model or retrieval heads", format.ErrInvalidArgument)
		}
		if data == nil {
			data = newRankData(len(lc.Retrieval))
		}
		if len(data.x) != len(lc.Retrieval) {
			return fmt.Errorf("%w: quality: rank fit over %d and %d KV heads", format.ErrInvalidArgument, len(data.x), len(lc.Retrieval))
		}
		lc.RankFit, lc.rankData, lc.Only = nil, data, []string{MethodSpanHeadsFit}
		if err := run(); err != nil {
			return fmt.Errorf("quality: rank fit: %w", err)
		}
		return nil
	}
	if needles != nil {
		cfg := *needles
		if err := collect(&cfg.LongConfig, func() error { _, _, err := RunNeedles(cfg); return err }); err != nil {
			return nil, err
		}
	}
	if text != nil {
		cfg := *text
		if err := collect(&cfg.LongConfig, func() error { _, _, err := RunLongText(cfg); return err }); err != nil {
			return nil, err
		}
	}
	if data == nil {
		return nil, fmt.Errorf("%w: quality: rank fit of no text", format.ErrInvalidArgument)
	}
	return fitRank(data, rankL2)
}

// rankL2 is FitRank's weight decay: enough to keep the Newton steps
// defined where a feature is constant over the samples.
const rankL2 = 1e-6

// fitRank fits, per KV head with samples, the weights minimising the mean
// over its (step, span) samples of the zoom BCE
//
//	-(y ln p + (1-y) ln(1-p)),  p = router.Sigmoid(w . x)
//
// against the teacher's mass y, plus l2/2 |w|^2, by Newton's method (the
// loss is convex). Heads with no sample keep nil weights.
func fitRank(d *rankData, l2 float64) (*RankFit, error) {
	fit := &RankFit{W: make([][]float64, len(d.x)), Samples: make([]int, len(d.x)), Loss: make([]float64, len(d.x)), Base: make([]float64, len(d.x)), Floor: make([]float64, len(d.x))}
	for gi := range d.x {
		n := len(d.y[gi])
		if n == 0 {
			continue
		}
		if len(d.x[gi]) != n*rankFeatures {
			return nil, fmt.Errorf("%w: quality: rank fit of KV head %d: %d features for %d samples", format.ErrInvalidArgument, gi, len(d.x[gi]), n)
		}
		w, loss, err := newtonBCE(d.x[gi], d.y[gi], rankFeatures, l2)
		if err != nil {
			return nil, fmt.Errorf("quality: rank fit of KV head %d: %w", gi, err)
		}
		fit.W[gi], fit.Loss[gi], fit.Samples[gi] = w, loss, n
		// The best constant predicts the mean mass.
		var mean float64
		for _, y := range d.y[gi] {
			mean += y
		}
		mean /= float64(n)
		for _, y := range d.y[gi] {
			fit.Base[gi] += bceProb(mean, y) / float64(n)
			fit.Floor[gi] += bceProb(y, y) / float64(n)
		}
	}
	return fit, nil
}

// bceLoss is the mean BCE of w over the samples (x: f features each, y:
// targets in [0, 1]) plus l2/2 |w|^2, with its gradient and Hessian (f x
// f, row-major) when grad is true.
func bceLoss(w, x, y []float64, f int, l2 float64, grad bool) (loss float64, g, h []float64) {
	n := float64(len(y))
	if grad {
		g, h = make([]float64, f), make([]float64, f*f)
	}
	for i, t := range y {
		xi := x[i*f : (i+1)*f]
		z := floats.Dot(w, xi)
		loss += router.BCE(z, t)
		if !grad {
			continue
		}
		p := router.Sigmoid(z)
		for j, v := range xi {
			g[j] += (p - t) * v / n
			for k := j; k < f; k++ {
				h[j*f+k] += p * (1 - p) * v * xi[k] / n
			}
		}
	}
	loss /= n
	for j, v := range w {
		loss += l2 / 2 * v * v
		if grad {
			g[j] += l2 * v
			h[j*f+j] += l2
		}
	}
	if grad {
		for j := range f {
			for k := range j {
				h[j*f+k] = h[k*f+j]
			}
		}
	}
	return loss, g, h
}

// newtonBCE minimises bceLoss from w = 0 by damped Newton steps (halved
// until the loss falls), at most 50, until a step changes the loss by
// less than 1e-12.
func newtonBCE(x, y []float64, f int, l2 float64) ([]float64, float64, error) {
	w := make([]float64, f)
	loss, g, h := bceLoss(w, x, y, f, l2, true)
	for range 50 {
		step, err := solve(h, g, f)
		if err != nil {
			return nil, 0, err
		}
		next := make([]float64, f)
		var nl float64
		for t := 1.0; ; t /= 2 {
			for j := range w {
				next[j] = w[j] - t*step[j]
			}
			if nl, _, _ = bceLoss(next, x, y, f, l2, false); nl <= loss || t < 1e-6 {
				break
			}
		}
		if nl > loss {
			break
		}
		done := loss-nl < 1e-12
		w = next
		loss, g, h = bceLoss(w, x, y, f, l2, true)
		if done {
			break
		}
	}
	return w, loss, nil
}

// solve is a's (n x n, symmetric positive definite) solution of a s = b,
// by Cholesky's factorisation.
func solve(a, b []float64, n int) ([]float64, error) {
	var ch mat.Cholesky
	if !ch.Factorize(mat.NewSymDense(n, a)) {
		return nil, fmt.Errorf("%w: quality: Hessian not positive definite", format.ErrInvalidArgument)
	}
	var s mat.VecDense
	if err := ch.SolveVecTo(&s, mat.NewVecDense(n, b)); err != nil {
		return nil, fmt.Errorf("%w: quality: Hessian: %w", format.ErrInvalidArgument, err)
	}
	return s.RawVector().Data, nil
}

// bceProb is the BCE of predicting p for target y.
func bceProb(p, y float64) float64 {
	p = min(max(p, 1e-300), 1-1e-16)
	return -(y*math.Log(p) + (1-y)*math.Log1p(-p))
}
