package rankgate

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/kvstore/kvstore/format"
)

// Options configure Train. Zero fields take the defaults in brackets.
type Options struct {
	Lambda float64 // budget weight lambda [0.5]
	Steps  int     // Adam steps [2000]
	Batch  int     // samples per step [256]
	LR     float64 // Adam step size [3e-3]
	Seed   uint64  // draws the batches (step s uses Seed and s)
}

// EnsureDefaults fills zero fields and returns o.
func (o *Options) EnsureDefaults() *Options {
	if o.Lambda == 0 {
		o.Lambda = 0.5
	}
	if o.Steps == 0 {
		o.Steps = 2000
	}
	if o.Batch == 0 {
		o.Batch = 256
	}
	if o.LR == 0 {
		o.LR = 3e-3
	}
	return o
}

// State is a training run that can stop and resume: the parameters, Adam's
// moments and the steps taken.
type State struct {
	Step    int
	P, M, V *Params
}

// NewState starts a run from p.
func NewState(p *Params) *State { return &State{P: p, M: p.zero(), V: p.zero()} }

// adam's decay rates and epsilon.
const (
	beta1  = 0.9
	beta2  = 0.999
	adamEp = 1e-8
)

// Step takes one Adam step on batch and returns the batch's mean loss
// before it.
func (s *State) step(batch []*Sample, o *Options) float64 {
	g := s.P.zero()
	loss := s.P.Grad(g, batch, o.Lambda)
	s.Step++
	c1 := 1 - math.Pow(beta1, float64(s.Step))
	c2 := 1 - math.Pow(beta2, float64(s.Step))
	pv, mv, vv, gv := s.P.Vectors(), s.M.Vectors(), s.V.Vectors(), g.Vectors()
	for k := range pv {
		for i, gi := range gv[k] {
			mv[k][i] = beta1*mv[k][i] + (1-beta1)*gi
			vv[k][i] = beta2*vv[k][i] + (1-beta2)*gi*gi
			pv[k][i] -= o.LR * (mv[k][i] / c1) / (math.Sqrt(vv[k][i]/c2) + adamEp)
		}
	}
	return loss
}

// Train continues s on samples until opts.Steps steps, each on a batch
// drawn (with replacement) by opts.Seed and the step number, so that a
// resumed run takes the steps an unbroken one would. progress, when not
// nil, is called after every step with the step and its batch loss. ctx
// is checked before every step: once done, Train returns its error,
// wrapped, with s as far as it got.
func Train(ctx context.Context, s *State, samples []*Sample, opts Options, progress func(step int, loss float64)) error {
	o := opts.EnsureDefaults()
	if len(samples) == 0 || o.Batch < 1 || o.Steps < 0 || !(o.LR > 0) || !(o.Lambda >= 0) {
		return fmt.Errorf("%w: rank gate: train on %d samples, %+v", format.ErrInvalidArgument, len(samples), *o)
	}
	for _, sm := range samples {
		if len(sm.E) != s.P.R || len(sm.Features) != len(s.P.W1)/s.P.H {
			return fmt.Errorf("%w: rank gate: a sample of r_max %d for a gate of %d", format.ErrInvalidArgument, len(sm.E), s.P.R)
		}
	}
	batch := make([]*Sample, o.Batch)
	for s.Step < o.Steps {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("rank gate: training stopped at step %d: %w", s.Step, err)
		}
		rng := rand.New(rand.NewPCG(o.Seed, uint64(s.Step)))
		for i := range batch {
			batch[i] = samples[rng.IntN(len(samples))]
		}
		loss := s.step(batch, o)
		if progress != nil {
			progress(s.Step, loss)
		}
	}
	return nil
}
