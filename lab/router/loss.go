package router

import (
	"fmt"
	"math"

	"github.com/kvstore/kvstore/reconstruct"
)

// Example is one (layer, KV head) of one training context: its spans'
// summary keys and zoom costs, and the decode steps that route over them.
type Example struct {
	// Group is layer*KVHeads + head.
	Group int
	// Keys are the spans' summary keys, pre-RoPE, Spans x HeadDim.
	Keys []float64
	// Tokens is per span the rows a zoom adds (0: the span cannot be
	// zoomed, as an unfactored one; it is left out of the loss).
	Tokens []int
	// Ends is per span its end (exclusive token index), which the recency
	// term reads with each Step's Pos; nil: no positions, allowed only
	// while the group's recency weight is 0 and not trained.
	Ends []int
	// Steps are the decode steps.
	Steps []Step
}

// Step is one decode step of one (layer, KV head).
type Step struct {
	// Pos is the decoded token's position.
	Pos int64
	// Queries are the pre-RoPE queries of the KV head's query heads,
	// heads x HeadDim.
	Queries []float64
	// Mass is per span the teacher's attention mass: full attention of the
	// step over the whole context (and the decoded rows before it), summed
	// over the span's rows, averaged over the query heads (so in [0, 1]).
	Mass []float64
}

// Options weigh the loss terms.
type Options struct {
	// Zoom weighs the zoom BCE (0: 1).
	Zoom float64
	// Budget weighs the budget penalty (0: none) and Share is its target:
	// the share of the zoomable rows zoomed, Temp the temperature of the
	// soft zoom decisions (0: 0.01).
	Budget, Share, Temp float64
	// KL weighs the distillation term (Distill; 0: none). CutTemp is the
	// temperature of its budget cut's soft decision (0: Temp).
	KL, CutTemp float64
	// Recency trains the recency weights (Params.Recency); without it
	// Train leaves them as they are (0 for routers from New: SeKV's
	// routers, which do not see positions).
	Recency bool
	// soft, for the gradient check, lets every zoomable span in with
	// its soft decision as its gate (no threshold, budget or floor):
	// then Distill's gradient is the exact gradient of its loss on a
	// one-layer model.
	soft bool
	// softCut, with soft, lets the zoom budget in as the soft cut: c
	// solving sum_s n_s sigmoid((alpha_s - c)/CutTemp) = the budget
	// (softCut in distill.go), each gate zt_s zc_s; the gradient then
	// checks the budget cut's, dc/dalpha included.
	softCut bool
}

// resolve is o with its defaults, or ErrInvalidArgument for a weight that
// is not finite and at least 0, a temperature not finite and above 0, or
// a Share outside [0, 1]: Loss and Distill take the same options.
func (o Options) resolve() (Options, error) {
	if o.Zoom == 0 {
		o.Zoom = 1
	}
	if o.Temp == 0 {
		o.Temp = 0.01
	}
	if o.CutTemp == 0 {
		o.CutTemp = o.Temp
	}
	finite := func(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
	for _, w := range []float64{o.Zoom, o.Budget, o.KL} {
		if !finite(w) || w < 0 {
			return o, fmt.Errorf("%w: loss weight %v, want finite and at least 0", ErrInvalidArgument, w)
		}
	}
	for _, t := range []float64{o.Temp, o.CutTemp} {
		if !finite(t) || t <= 0 {
			return o, fmt.Errorf("%w: temperature %v, want finite and above 0", ErrInvalidArgument, t)
		}
	}
	if !(o.Share >= 0 && o.Share <= 1) {
		return o, fmt.Errorf("%w: budget share %v outside [0, 1]", ErrInvalidArgument, o.Share)
	}
	return o, nil
}

// Grad is the gradient of the loss, shaped as Params.
type Grad struct {
	W                  [][]float64
	Bias, Tau, Recency []float64
	Loss               float64
	BCE, Spent         float64 // the mean zoom BCE and the mean soft zoom share
	KL                 float64 // the mean distillation KL (Distill)
}

// NewGrad is a zero gradient shaped as p, for Distill to add to.
func NewGrad(p *Params) *Grad { return newGrad(p) }

// fits reports whether g is shaped as p.
func (g *Grad) fits(p *Params) bool {
	n := p.Groups()
	if g == nil || len(g.W) != n || len(g.Bias) != n || len(g.Tau) != n || len(g.Recency) != n {
		return false
	}
	for i, w := range g.W {
		if len(w) != len(p.W[i]) {
			return false
		}
	}
	return true
}

func newGrad(p *Params) *Grad {
	g := &Grad{W: make([][]float64, p.Groups()), Bias: make([]float64, p.Groups()), Tau: make([]float64, p.Groups()),
		Recency: make([]float64, p.Groups())}
	for i := range g.W {
		g.W[i] = make([]float64, p.Dim*p.HeadDim)
	}
	return g
}

// Loss is the mean over the examples' steps of
//
//	Zoom * mean_s BCE(alpha_s, Mass_s) + Budget * (sum_s zt_s n_s / sum_s n_s - Share)^2
//
// over the zoomable spans s (n_s = Tokens[s] > 0), with alpha_s the
// router's score (its logit plus rho times the span's recency at the
// step's position, reconstruct.Recency) and zt_s = Sigmoid((alpha_s - tau)/Temp) the soft zoom
// decision the straight-through estimator differentiates in place of the
// hard z_s = [alpha_s > tau]. The max over query heads is differentiated
// through its argmax. It returns the loss and its gradient.
func Loss(p *Params, exs []Example, o Options) (*Grad, error) {
	if err := p.check(); err != nil {
		return nil, err
	}
	o, err := o.resolve()
	if err != nil {
		return nil, err
	}
	gr := newGrad(p)
	steps := 0
	for _, ex := range exs {
		steps += len(ex.Steps)
	}
	if steps == 0 {
		return nil, fmt.Errorf("%w: loss of no steps", ErrInvalidArgument)
	}
	for i := range exs {
		if err := exampleLoss(p, &exs[i], o, gr, 1/float64(steps)); err != nil {
			return nil, fmt.Errorf("example %d: %w", i, err)
		}
	}
	return gr, nil
}

// exampleLoss adds one example's steps, each weighted w, to gr.
func exampleLoss(p *Params, ex *Example, o Options, gr *Grad, w float64) error {
	hd, dim := p.HeadDim, p.Dim
	spans := len(ex.Tokens)
	if ex.Group < 0 || ex.Group >= p.Groups() || len(ex.Keys) != spans*hd {
		return fmt.Errorf("%w: group %d of %d, %d key floats for %d spans", ErrInvalidArgument, ex.Group, p.Groups(), len(ex.Keys), spans)
	}
	if err := checkEnds(ex.Ends, spans, p.Recency[ex.Group], o); err != nil {
		return err
	}
	W := p.W[ex.Group]
	proj := func(x []float64) []float64 {
		out := make([]float64, dim)
		for k := range out {
			var acc float64
			for j, v := range W[k*hd : (k+1)*hd] {
				acc += v * x[j]
			}
			out[k] = acc
		}
		return out
	}
	var total float64
	pk := make([][]float64, spans) // W k_s
	zoomable := 0
	for s, n := range ex.Tokens {
		if n > 0 {
			pk[s] = proj(ex.Keys[s*hd : (s+1)*hd])
			total += float64(n)
			zoomable++
		}
	}
	if zoomable == 0 {
		return nil
	}
	gW := gr.W[ex.Group]
	dpk := make([][]float64, spans) // dL/d(W k_s), accumulated over steps
	for s := range dpk {
		if pk[s] != nil {
			dpk[s] = make([]float64, dim)
		}
	}
	for _, st := range ex.Steps {
		heads := len(st.Queries) / hd
		if heads == 0 || len(st.Queries) != heads*hd || len(st.Mass) != spans {
			return fmt.Errorf("%w: step of %d query floats, %d masses for %d spans", ErrInvalidArgument, len(st.Queries), len(st.Mass), spans)
		}
		pq := make([][]float64, heads)
		dpq := make([][]float64, heads)
		for h := range pq {
			pq[h] = proj(st.Queries[h*hd : (h+1)*hd])
			dpq[h] = make([]float64, dim)
		}
		// Forward: logits, scores, soft decisions.
		x := make([]float64, spans)
		arg := make([]int, spans)
		var spent float64
		alpha := make([]float64, spans)
		zt := make([]float64, spans)
		near := make([]float64, spans) // each span's recency feature at the step
		for s := range x {
			if pk[s] == nil {
				continue
			}
			x[s] = math.Inf(-1)
			for h := range pq {
				if d := dot(pq[h], pk[s]); d > x[s] {
					x[s], arg[s] = d, h
				}
			}
			near[s] = recency(st.Pos, ex.Ends, s)
			x[s] += p.Bias[ex.Group] + p.Recency[ex.Group]*near[s]
			alpha[s] = Sigmoid(x[s])
			zt[s] = Sigmoid((alpha[s] - p.Tau[ex.Group]) / o.Temp)
			spent += zt[s] * float64(ex.Tokens[s])
		}
		spent /= total
		dev := spent - o.Share
		gr.Loss += w * o.Budget * dev * dev
		gr.Spent += w * spent
		// Backward.
		dSpent := w * o.Budget * 2 * dev
		for s := range x {
			if pk[s] == nil {
				continue
			}
			y := st.Mass[s]
			a := alpha[s]
			bce := BCE(x[s], y)
			gr.Loss += w * o.Zoom * bce / float64(zoomable)
			gr.BCE += w * bce / float64(zoomable)
			dx := w * o.Zoom * (a - y) / float64(zoomable)
			// zt = Sigmoid((alpha - tau)/T): dzt/dalpha = zt(1-zt)/T.
			dz := dSpent * float64(ex.Tokens[s]) / total * zt[s] * (1 - zt[s]) / o.Temp
			gr.Tau[ex.Group] -= dz
			dx += dz * a * (1 - a)
			gr.Bias[ex.Group] += dx
			gr.Recency[ex.Group] += dx * near[s]
			h := arg[s]
			for k := range dim {
				dpq[h][k] += dx * pk[s][k]
				dpk[s][k] += dx * pq[h][k]
			}
		}
		for h := range pq {
			q := st.Queries[h*hd : (h+1)*hd]
			for k := range dim {
				if dpq[h][k] == 0 {
					continue
				}
				row := gW[k*hd : (k+1)*hd]
				for j := range row {
					row[j] += dpq[h][k] * q[j]
				}
			}
		}
	}
	for s := range dpk {
		if dpk[s] == nil {
			continue
		}
		ks := ex.Keys[s*hd : (s+1)*hd]
		for k := range dim {
			row := gW[k*hd : (k+1)*hd]
			for j := range row {
				row[j] += dpk[s][k] * ks[j]
			}
		}
	}
	return nil
}

// Scores are the router's alpha per span for one step (NaN for the spans
// that cannot be zoomed), in float64: what reconstruct.Router.RouteAt
// computes in float32 with Scale 1 (the recency term 0 where ex has no
// Ends).
func Scores(p *Params, ex *Example, st *Step) []float64 {
	hd, dim := p.HeadDim, p.Dim
	W := p.W[ex.Group]
	proj := func(x []float64) []float64 {
		out := make([]float64, dim)
		for k := range out {
			out[k] = dot(W[k*hd:(k+1)*hd], x)
		}
		return out
	}
	heads := len(st.Queries) / hd
	pq := make([][]float64, heads)
	for h := range pq {
		pq[h] = proj(st.Queries[h*hd : (h+1)*hd])
	}
	out := make([]float64, len(ex.Tokens))
	for s, n := range ex.Tokens {
		if n == 0 {
			out[s] = math.NaN()
			continue
		}
		pk := proj(ex.Keys[s*hd : (s+1)*hd])
		x := math.Inf(-1)
		for h := range pq {
			x = max(x, dot(pq[h], pk))
		}
		out[s] = Sigmoid(x + p.Bias[ex.Group] + p.Recency[ex.Group]*recency(st.Pos, ex.Ends, s))
	}
	return out
}

// recency is span s's recency feature at position pos, 0 without ends.
func recency(pos int64, ends []int, s int) float64 {
	if ends == nil {
		return 0
	}
	return reconstruct.Recency(pos, ends[s])
}

// checkEnds refuses span ends not one per span, or none where the recency
// weight rho is not 0 or is trained.
func checkEnds(ends []int, spans int, rho float64, o Options) error {
	switch {
	case ends == nil && (rho != 0 || o.Recency):
		return fmt.Errorf("%w: no span ends, and the recency weight is %v (trained: %v)", ErrInvalidArgument, rho, o.Recency)
	case ends != nil && len(ends) != spans:
		return fmt.Errorf("%w: %d span ends for %d spans", ErrInvalidArgument, len(ends), spans)
	}
	return nil
}

func dot(a, b []float64) float64 {
	var s float64
	for i, v := range a {
		s += v * b[i]
	}
	return s
}

// Sigmoid is 1 / (1 + e^-x).
func Sigmoid(x float64) float64 { return 1 / (1 + math.Exp(-x)) }

// BCE is the zoom BCE of a logit x against a target y in [0, 1]:
// -(y ln a + (1-y) ln(1-a)) with a = Sigmoid(x), without overflow or
// cancellation.
func BCE(x, y float64) float64 { return y*softplus(-x) + (1-y)*softplus(x) }

// softplus is ln(1 + e^x), without overflow or cancellation.
func softplus(x float64) float64 {
	if x > 0 {
		return x + math.Log1p(math.Exp(-x))
	}
	return math.Log1p(math.Exp(x))
}
