package rankgate

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store"
)

// Params are g_phi's weights in float64 while it trains, laid out as
// store.RankGate's: W1 [H][I], B1 [H], W2 [R][H], B2 [R], I =
// store.RankGateInputs(R).
type Params struct {
	R, H           int
	W1, B1, W2, B2 []float64
}

// NewParams returns a gate of r_max r and hidden width h with W1 and W2
// drawn from N(0, 1/fan-in) by seed and zero biases.
func NewParams(r, h int, seed uint64) (*Params, error) {
	if r < 1 || r > format.MaxFactorCols || h < 1 || h > 1024 {
		return nil, fmt.Errorf("%w: rank gate: r_max %d, hidden %d", format.ErrInvalidArgument, r, h)
	}
	in := store.RankGateInputs(r)
	p := &Params{R: r, H: h, W1: make([]float64, h*in), B1: make([]float64, h), W2: make([]float64, r*h), B2: make([]float64, r)}
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	for i := range p.W1 {
		p.W1[i] = rng.NormFloat64() / math.Sqrt(float64(in))
	}
	for i := range p.W2 {
		p.W2[i] = rng.NormFloat64() / math.Sqrt(float64(h))
	}
	return p, nil
}

// Vectors returns the parameter vectors in layout order (views, not
// copies).
func (p *Params) Vectors() [][]float64 { return [][]float64{p.W1, p.B1, p.W2, p.B2} }

// Gate returns the parameters as the store's float32 rank gate.
func (p *Params) Gate() *store.RankGate {
	f := func(v []float64) []float32 {
		out := make([]float32, len(v))
		for i, x := range v {
			out[i] = float32(x)
		}
		return out
	}
	return &store.RankGate{MaxRank: p.R, Hidden: p.H, W1: f(p.W1), B1: f(p.B1), W2: f(p.W2), B2: f(p.B2)}
}

// FromGate returns a stored gate's weights as Params.
func FromGate(g *store.RankGate) *Params {
	f := func(v []float32) []float64 {
		out := make([]float64, len(v))
		for i, x := range v {
			out[i] = float64(x)
		}
		return out
	}
	return &Params{R: g.MaxRank, H: g.Hidden, W1: f(g.W1), B1: f(g.B1), W2: f(g.W2), B2: f(g.B2)}
}

// Clone returns a deep copy.
func (p *Params) Clone() *Params {
	c := func(v []float64) []float64 { return append([]float64(nil), v...) }
	return &Params{R: p.R, H: p.H, W1: c(p.W1), B1: c(p.B1), W2: c(p.W2), B2: c(p.B2)}
}

// zero returns parameters of p's shape, all zero (a gradient).
func (p *Params) zero() *Params {
	return &Params{R: p.R, H: p.H, W1: make([]float64, len(p.W1)), B1: make([]float64, len(p.B1)),
		W2: make([]float64, len(p.W2)), B2: make([]float64, len(p.B2))}
}

// forward returns the hidden activations and the gates of features x.
func (p *Params) forward(x []float64) (h, m []float64) {
	in := len(x)
	h = make([]float64, p.H)
	for j := range h {
		a := p.B1[j]
		for i, w := range p.W1[j*in : (j+1)*in] {
			a += w * x[i]
		}
		h[j] = math.Tanh(a)
	}
	m = make([]float64, p.R)
	for i := range m {
		z := p.B2[i]
		for j, w := range p.W2[i*p.H : (i+1)*p.H] {
			z += w * h[j]
		}
		m[i] = 1 / (1 + math.Exp(-z))
	}
	return h, m
}

// Gates returns g_phi's gates of features x.
func (p *Params) Gates(x []float64) []float64 {
	_, m := p.forward(x)
	return m
}

// Loss is the objective of one sample under gates m:
//
//	sum_i (1 - m_i)^2 e_i + tail + lambda * Cost * sum_i m_i
//
// the relative squared error ||X - X_m||^2 / ||X||^2 of the span's rows X
// with its singular values s_i scaled by m_i (exact from the spectrum:
// the singular vectors are orthonormal, so the error is
// sum_i (1-m_i)^2 s_i^2 over the first R plus the energy past them), plus
// lambda times the expected stored bytes sum_i m_i * (rows+cols+1) *
// factor size as a fraction of the span's raw bf16 rows.
func (s *Sample) Loss(m []float64, lambda float64) float64 {
	var l, used float64
	for i, e := range s.E {
		d := 1 - m[i]
		l += d * d * e
		used += m[i]
	}
	return l + s.Tail + lambda*s.Cost*used
}

// Grad adds to g the gradient of the mean of Loss over samples with
// respect to p's parameters, scaled by 1/len(samples), and returns that
// mean loss.
func (p *Params) Grad(g *Params, samples []*Sample, lambda float64) float64 {
	var total float64
	inv := 1 / float64(len(samples))
	dz := make([]float64, p.R)
	da := make([]float64, p.H)
	for _, s := range samples {
		x := s.Features
		in := len(x)
		h, m := p.forward(x)
		total += s.Loss(m, lambda)
		for i := range dz {
			dm := -2*(1-m[i])*s.E[i] + lambda*s.Cost
			dz[i] = inv * dm * m[i] * (1 - m[i])
		}
		clear(da)
		for i, d := range dz {
			g.B2[i] += d
			w2 := p.W2[i*p.H : (i+1)*p.H]
			g2 := g.W2[i*p.H : (i+1)*p.H]
			for j := range h {
				g2[j] += d * h[j]
				da[j] += d * w2[j]
			}
		}
		for j := range da {
			d := da[j] * (1 - h[j]*h[j])
			g.B1[j] += d
			g1 := g.W1[j*in : (j+1)*in]
			for k, xk := range x {
				g1[k] += d * xk
			}
		}
	}
	return total * inv
}

// MeanLoss is the mean of Loss over samples.
func (p *Params) MeanLoss(samples []*Sample, lambda float64) float64 {
	var total float64
	for _, s := range samples {
		total += s.Loss(p.Gates(s.Features), lambda)
	}
	return total / float64(len(samples))
}
