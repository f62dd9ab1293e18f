package router

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"

	"github.com/kvstore/kvstore/lab/llama"
)

// The distillation term: KL(p_full || p_SeKV) of the next-token
// distribution at a decode step over a span memory whose zooms the routers
// decide, differentiated through straight-through zoom decisions.
//
// Forward: at each layer the step's pre-RoPE queries are routed (the
// score of Loss: alpha_s = sigmoid(max_h (W q_h).(W k_s) + b)), the spans
// scoring above tau are zoomed in descending score while their rows fit
// the layer's zoom budget (reconstruct.Select with Fill, as span memory
// zooms), and attention runs over the resident rows, the continuation's
// rows so far and the zoomed spans' rows (llama.GateForward with z_s = 1
// for a zoomed span, 0 for the others). Backward: the gradient with
// respect to each span's gate (llama.GateTape.Backward: how the KL would
// move if the span were let in a little, or pushed out) is taken as the
// gradient with respect to the soft decision z_s = zt_s zc_s and carried
// to W, b and tau (the straight-through estimator). zt_s = sigmoid((alpha_s
// - tau)/Temp) is the threshold's decision; zc_s = sigmoid((alpha_s -
// cut)/CutTemp) is the budget's, where cut is the score of the layer's first
// span the budget refused (zc_s = 1 when the budget refused none): the
// relaxation of a top-k choice. The cut is differentiated as the cut c of
// a soft budget, sum_s n_s zc_s = the budget (n_s a span's rows), would
// be: dc/dalpha_s = n_s zc_s' / sum n zc', so that shifting every score of
// a layer alike carries no gradient. Without zc, once tau falls below
// every score the budget alone decides the zoom and no gradient reaches
// W. The queries are taken as given: the routers' effect on a later
// layer's queries through an earlier layer's zoom is not differentiated.
//
// A span whose soft decision is saturated (dz_s/dalpha_s below gateFloor)
// carries no gradient and, not zoomed, changes nothing in the forward
// pass; its rows are left out of attention. That is exact in the loss and
// drops only gradients below gateFloor.

const gateFloor = 1e-4

// Window is one training context of the distillation term: a span memory
// at one budget as the student holds it, the continuation decoded over
// it, and the teacher's next-token distribution after each of its tokens.
type Window struct {
	// Pos is the position of Cont[0], Cont the continuation.
	Pos  int64
	Cont []int
	// Teacher[i] is full attention's next-token distribution after Cont[i].
	Teacher [][]float64
	// Zoom is a layer's zoom budget in rows, shared by its KV heads.
	Zoom int64
	// Ends is per span its end (exclusive token index), for the recency
	// term (Example.Ends); nil as there.
	Ends []int
	// Groups are per (layer, KV head), layer*KVHeads + head.
	Groups []WindowGroup
}

// WindowGroup is one (layer, KV head) of a Window.
type WindowGroup struct {
	// K (post-RoPE) and V are the resident rows, always attended,
	// [rows][HeadDim].
	K, V []float32
	// ContK and ContV are the continuation's rows as full attention
	// computed them, [len(Cont)][HeadDim]: step i attends to the first i.
	ContK, ContV []float32
	// Keys are the spans' summary keys, pre-RoPE, Spans x HeadDim.
	Keys []float64
	// SpanK and SpanV are per span the rows a zoom adds (none: the span
	// cannot be zoomed).
	SpanK, SpanV [][]float32
}

// StepRef is one decode step of a Window: Window indexes the windows,
// Step its continuation.
type StepRef struct{ Window, Step int }

// Refs lists every step of wins.
func Refs(wins []Window) []StepRef {
	var refs []StepRef
	for w, win := range wins {
		for i := range win.Cont {
			refs = append(refs, StepRef{w, i})
		}
	}
	return refs
}

// SampleRefs is n of refs drawn without replacement by a generator seeded
// with seed (all of them when n is 0 or at least len(refs)), in the
// order drawn.
func SampleRefs(refs []StepRef, n int, seed uint64) []StepRef {
	if n <= 0 || n >= len(refs) {
		return refs
	}
	rng := rand.New(rand.NewPCG(seed, 0x6b6c))
	perm := rng.Perm(len(refs))[:n]
	out := make([]StepRef, n)
	for i, j := range perm {
		out[i] = refs[j]
	}
	return out
}

// Distill adds o.KL times the mean over refs of KL(teacher || student) at
// each step, and its straight-through gradient, to gr (gr.KL gets the mean
// KL itself). Steps run on GOMAXPROCS goroutines. Errors wrap
// ErrInvalidArgument (no model, a window not shaped for m and p, a
// teacher entry that is no probability, options Loss refuses too, a gr
// not shaped as p: NewGrad makes one) or are the model's.
func Distill(m *llama.Model, p *Params, wins []Window, refs []StepRef, o Options, gr *Grad) error {
	if err := p.check(); err != nil {
		return err
	}
	if len(refs) == 0 {
		return fmt.Errorf("%w: distillation over no steps", ErrInvalidArgument)
	}
	if !gr.fits(p) {
		return fmt.Errorf("%w: distillation into a gradient not shaped as the routers (NewGrad)", ErrInvalidArgument)
	}
	if m == nil {
		return fmt.Errorf("%w: distillation without a model", ErrInvalidArgument)
	}
	o, err := o.resolve()
	if err != nil {
		return err
	}
	for i := range wins {
		if err := checkWindow(m, p, &wins[i], o); err != nil {
			return fmt.Errorf("window %d: %w", i, err)
		}
	}
	for _, r := range refs {
		if r.Window < 0 || r.Window >= len(wins) || r.Step < 0 || r.Step >= len(wins[r.Window].Cont) {
			return fmt.Errorf("%w: step %+v of %d windows", ErrInvalidArgument, r, len(wins))
		}
	}
	workers := min(runtime.GOMAXPROCS(0), len(refs))
	grads := make([]*Grad, workers)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for k := range workers {
		grads[k] = newGrad(p)
		wg.Go(func() {
			pk := map[[2]int][][]float64{} // (window, group): W k_s per span
			for j := k; j < len(refs); j += workers {
				if err := distillStep(m, p, wins, refs[j], o, grads[k], 1/float64(len(refs)), pk); err != nil {
					errs[k] = err
					return
				}
			}
		})
	}
	wg.Wait()
	for k, g := range grads {
		if errs[k] != nil {
			return errs[k]
		}
		gr.add(g)
	}
	return nil
}

// add adds o's gradient and loss terms to g.
func (g *Grad) add(o *Grad) {
	for i, w := range o.W {
		axpy(g.W[i], 1, w)
	}
	axpy(g.Bias, 1, o.Bias)
	axpy(g.Tau, 1, o.Tau)
	axpy(g.Recency, 1, o.Recency)
	g.Loss += o.Loss
	g.BCE += o.BCE
	g.Spent += o.Spent
	g.KL += o.KL
}

func axpy(y []float64, a float64, x []float64) {
	for i, v := range x {
		y[i] += a * v
	}
}

func checkWindow(m *llama.Model, p *Params, w *Window, o Options) error {
	hd := m.HeadDim()
	switch {
	case p.Layers != m.Layers || p.KVHeads != m.KVHeads || p.HeadDim != hd:
		return fmt.Errorf("%w: routers of %d layers x %d KV heads x %d, model %d x %d x %d", ErrInvalidArgument, p.Layers, p.KVHeads, p.HeadDim, m.Layers, m.KVHeads, hd)
	case len(w.Groups) != p.Groups() || len(w.Teacher) != len(w.Cont) || w.Zoom < 0:
		return fmt.Errorf("%w: %d groups, %d teacher rows for %d tokens, zoom %d", ErrInvalidArgument, len(w.Groups), len(w.Teacher), len(w.Cont), w.Zoom)
	}
	for i, t := range w.Teacher {
		if len(t) != m.Vocab {
			return fmt.Errorf("%w: teacher row %d has %d of %d entries", ErrInvalidArgument, i, len(t), m.Vocab)
		}
		for _, v := range t {
			if !(v >= 0 && v <= 1) {
				return fmt.Errorf("%w: teacher row %d holds %v, not a probability", ErrInvalidArgument, i, v)
			}
		}
	}
	for g, wg := range w.Groups {
		spans := len(wg.SpanK)
		if err := checkEnds(w.Ends, spans, p.Recency[g], o); err != nil {
			return fmt.Errorf("group %d: %w", g, err)
		}
		bad := len(wg.K)%hd != 0 || len(wg.V) != len(wg.K) || len(wg.ContK) != len(w.Cont)*hd || len(wg.ContV) != len(wg.ContK) ||
			len(wg.Keys) != spans*hd || len(wg.SpanV) != spans
		for s := 0; !bad && s < spans; s++ {
			bad = len(wg.SpanK[s])%hd != 0 || len(wg.SpanV[s]) != len(wg.SpanK[s])
		}
		if bad {
			return fmt.Errorf("%w: group %d: rows not shaped [rows][%d] for %d spans and %d tokens", ErrInvalidArgument, g, hd, spans, len(w.Cont))
		}
	}
	return nil
}

// routed is one group's routing at a step: per span its logit, score,
// soft decision, the query head of the max, and the gate index of its
// rows (-1: left out).
type routed struct {
	q, pq            [][]float64 // the query heads q_h and W q_h
	x, alpha, zt, zc []float64
	near             []float64 // each span's recency feature at the step
	arg, gate        []int
	spans            []int // per gate index, the span
	spanRows         []int
}

// softCut is the cut c at which the soft decisions sigmoid((alpha_s -
// c)/temp) of a layer's zoomable spans (rts, its groups) let in zoom rows
// in all, found by bisection; -Inf when every span fits.
func softCut(rts []*routed, zoom int64, temp float64) float64 {
	lo, hi, total := math.Inf(1), math.Inf(-1), 0
	for _, r := range rts {
		for s, n := range r.spanRows {
			if n > 0 {
				lo, hi, total = min(lo, r.alpha[s]), max(hi, r.alpha[s]), total+n
			}
		}
	}
	if int64(total) <= zoom {
		return math.Inf(-1)
	}
	rows := func(c float64) float64 {
		var sum float64
		for _, r := range rts {
			for s, n := range r.spanRows {
				sum += float64(n) * Sigmoid((r.alpha[s]-c)/temp)
			}
		}
		return sum
	}
	lo, hi = lo-60*temp, hi+60*temp
	for range 200 {
		mid := (lo + hi) / 2
		if rows(mid) > float64(zoom) {
			lo = mid
		} else {
			hi = mid
		}
	}
	return (lo + hi) / 2
}

// slope is d(zt zc)/d alpha of span s: how fast its soft decision moves
// with its score, through the threshold and the budget's cut.
func (r *routed) slope(s int, o Options) float64 {
	zt, zc := r.zt[s], r.zc[s]
	return zt * zc * ((1-zt)/o.Temp + (1-zc)/o.CutTemp)
}

// distillStep adds one step's weighted loss and gradient to gr.
func distillStep(m *llama.Model, p *Params, wins []Window, ref StepRef, o Options, gr *Grad, w float64, pkCache map[[2]int][][]float64) error {
	win := &wins[ref.Window]
	hd, kv := p.HeadDim, p.KVHeads
	per := m.Heads / kv
	i := ref.Step
	pos := win.Pos + int64(i)
	rt := make([]*routed, p.Groups())
	pkOf := func(gi int) [][]float64 {
		key := [2]int{ref.Window, gi}
		if pk, ok := pkCache[key]; ok {
			return pk
		}
		wg := &win.Groups[gi]
		pk := make([][]float64, len(wg.SpanK))
		for s := range pk {
			if len(wg.SpanK[s]) > 0 {
				pk[s] = p.project(gi, wg.Keys[s*hd:(s+1)*hd])
			}
		}
		pkCache[key] = pk
		return pk
	}
	rows := func(layer int, qPre []float64) ([]llama.GateRows, error) {
		type cand struct {
			g, s  int
			alpha float64
		}
		var cands []cand
		for g := range kv {
			gi := layer*kv + g
			wg := &win.Groups[gi]
			pk := pkOf(gi)
			r := &routed{q: make([][]float64, per), pq: make([][]float64, per), x: make([]float64, len(pk)), alpha: make([]float64, len(pk)),
				zt: make([]float64, len(pk)), near: make([]float64, len(pk)), arg: make([]int, len(pk)), spanRows: make([]int, len(pk))}
			for h := range per {
				r.q[h] = qPre[(g*per+h)*hd : (g*per+h+1)*hd]
				r.pq[h] = p.project(gi, r.q[h])
			}
			for s, k := range pk {
				if k == nil {
					continue
				}
				r.spanRows[s] = len(wg.SpanK[s]) / hd
				r.x[s] = math.Inf(-1)
				for h, q := range r.pq {
					if d := dot(q, k); d > r.x[s] {
						r.x[s], r.arg[s] = d, h
					}
				}
				r.near[s] = recency(pos, win.Ends, s)
				r.x[s] += p.Bias[gi] + p.Recency[gi]*r.near[s]
				r.alpha[s] = Sigmoid(r.x[s])
				r.zt[s] = Sigmoid((r.alpha[s] - p.Tau[gi]) / o.Temp)
				if r.alpha[s] > p.Tau[gi] {
					cands = append(cands, cand{g, s, r.alpha[s]})
				}
			}
			rt[gi] = r
		}
		slices.SortFunc(cands, func(a, b cand) int {
			return cmp.Or(cmp.Compare(b.alpha, a.alpha), cmp.Compare(a.s, b.s), cmp.Compare(a.g, b.g))
		})
		var used int64
		zoomed := make([][]bool, kv)
		for g := range zoomed {
			zoomed[g] = make([]bool, len(rt[layer*kv+g].alpha))
		}
		cut := math.Inf(-1) // the score of the first span the budget refused
		for _, c := range cands {
			n := int64(rt[layer*kv+c.g].spanRows[c.s])
			if used+n > win.Zoom {
				if math.IsInf(cut, -1) {
					cut = c.alpha
				}
				continue
			}
			used += n
			zoomed[c.g][c.s] = true
		}
		if o.soft {
			cut = math.Inf(-1)
			if o.softCut {
				cut = softCut(rt[layer*kv:(layer+1)*kv], win.Zoom, o.CutTemp)
			}
		}
		for g := range kv {
			r := rt[layer*kv+g]
			r.zc = make([]float64, len(r.alpha))
			for s, a := range r.alpha {
				r.zc[s] = 1
				if !math.IsInf(cut, -1) {
					r.zc[s] = Sigmoid((a - cut) / o.CutTemp)
				}
			}
		}
		out := make([]llama.GateRows, kv)
		for g := range kv {
			gi := layer*kv + g
			wg, r := &win.Groups[gi], rt[gi]
			res, cont := len(wg.K)/hd, i
			rs := llama.GateRows{
				K: append(append(make([]float32, 0, (res+cont)*hd), wg.K...), wg.ContK[:cont*hd]...),
				V: append(append(make([]float32, 0, (res+cont)*hd), wg.V...), wg.ContV[:cont*hd]...),
			}
			rs.Gate = make([]int32, res+cont)
			for j := range rs.Gate {
				rs.Gate[j] = -1
			}
			for s, n := range r.spanRows {
				z := r.zt[s]
				if n == 0 || (!o.soft && !zoomed[g][s] && r.slope(s, o) < gateFloor) {
					continue
				}
				r.spans = append(r.spans, s)
				v := 0.0
				switch {
				case o.soft:
					v = z * r.zc[s]
				case zoomed[g][s]:
					v = 1
				}
				rs.Z = append(rs.Z, v)
				rs.K = append(rs.K, wg.SpanK[s]...)
				rs.V = append(rs.V, wg.SpanV[s]...)
				for range n {
					rs.Gate = append(rs.Gate, int32(len(rs.Z)-1))
				}
			}
			out[g] = rs
		}
		return out, nil
	}
	tape, err := m.GateForward(win.Cont[i], pos, rows)
	if err != nil {
		return fmt.Errorf("window %d step %d: %w", ref.Window, i, err)
	}
	loss, dl := llama.DistillGrad(tape.Logits, win.Teacher[i])
	gr.Loss += w * o.KL * loss
	gr.KL += w * loss
	dz := tape.Backward(dl)
	// dKL/dalpha per group and span: through the threshold's decision zt,
	// and through the budget's cut zc, where the cut c solves sum_s n_s
	// zc_s = the zoom budget (n_s the span's rows), so that it moves with
	// every score of the layer: dc/dalpha_s = n_s zc_s' / sum n zc'. A
	// shift of every score of a layer then moves no decision and carries
	// no gradient.
	dalpha := make([][]float64, len(rt))
	for l := range p.Layers {
		var cutSum, cutNorm float64
		for gi := l * kv; gi < (l+1)*kv; gi++ {
			r := rt[gi]
			dalpha[gi] = make([]float64, len(r.alpha))
			for j, s := range r.spans {
				d := w * o.KL * dz[l][gi%kv][j]
				if d == 0 {
					continue
				}
				zt, zc := r.zt[s], r.zc[s]
				thr := d * zc * zt * (1 - zt) / o.Temp
				gr.Tau[gi] -= thr
				viaCut := d * zt * zc * (1 - zc) / o.CutTemp
				dalpha[gi][s] += thr + viaCut
				cutSum += viaCut
			}
			for s, n := range r.spanRows {
				cutNorm += float64(n) * r.zc[s] * (1 - r.zc[s])
			}
		}
		if cutSum == 0 || cutNorm == 0 {
			continue
		}
		for gi := l * kv; gi < (l+1)*kv; gi++ {
			r := rt[gi]
			for s, n := range r.spanRows {
				dalpha[gi][s] -= cutSum * float64(n) * r.zc[s] * (1 - r.zc[s]) / cutNorm
			}
		}
	}
	for gi, r := range rt {
		pk := pkOf(gi)
		dpq := make([][]float64, per)
		for h := range dpq {
			dpq[h] = make([]float64, p.Dim)
		}
		moved := false
		for s, da := range dalpha[gi] {
			if da == 0 {
				continue
			}
			a := r.alpha[s]
			dx := da * a * (1 - a)
			gr.Bias[gi] += dx
			gr.Recency[gi] += dx * r.near[s]
			h := r.arg[s]
			axpy(dpq[h], dx, pk[s])
			p.outer(gr.W[gi], dx, r.pq[h], win.Groups[gi].Keys[s*hd:(s+1)*hd])
			moved = true
		}
		if !moved {
			continue
		}
		for h, d := range dpq {
			p.outer(gr.W[gi], 1, d, r.q[h])
		}
	}
	return nil
}

// project is W x for group gi.
func (p *Params) project(gi int, x []float64) []float64 {
	hd, W := p.HeadDim, p.W[gi]
	out := make([]float64, p.Dim)
	for k := range out {
		out[k] = dot(W[k*hd:(k+1)*hd], x)
	}
	return out
}

// outer adds a * u x^T (u of Dim, x of HeadDim) to gW, a group's W
// gradient: the gradient of (W x).v with respect to W is v x^T.
func (p *Params) outer(gW []float64, a float64, u, x []float64) {
	hd := p.HeadDim
	for k, c := range u {
		if c == 0 {
			continue
		}
		axpy(gW[k*hd:(k+1)*hd], a*c, x)
	}
}
