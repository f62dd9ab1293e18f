package router

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"

	"github.com/kvstore/kvstore/lab/llama"
)

// State is a training run's whole state: the routers, Adam's moments and
// the steps taken. Saved (Save) and loaded (Load), it resumes a run where
// it stopped.
type State struct {
	Params *Params
	// M and V are Adam's first and second moments, shaped as the
	// parameters flattened (Params.flat's order).
	M, V []float64
	Step int
	// Loss is the last step's loss.
	Loss float64
}

// NewState starts a run from p.
func NewState(p *Params) *State {
	n := len(p.flat())
	return &State{Params: p, M: make([]float64, n), V: make([]float64, n)}
}

// DefaultLR is Train's learning rate when none is given. Adam moves each
// parameter by up to about the learning rate per step, whatever its
// gradient's scale, and an untrained projection's weights are small (about
// 0.04 rms for gocode-2k's PCA projections, HeadDim^-1/4 times unit rows):
// at 1e-2 thirty steps rewrite them, and the routers lose the untrained
// projection's ranking of spans on natural text; at 1e-3 they refine it
// (docs/decisions.md, "Trained routers").
const DefaultLR = 1e-3

// TrainOptions configure Train.
type TrainOptions struct {
	Loss Options
	// Steps is the total Adam steps of the run (a resumed run goes on to
	// it); LR the learning rate (0: DefaultLR), constant.
	Steps int
	LR    float64
	// Progress, when not nil, is called after each step.
	Progress func(s *State, g *Grad)
	// Checkpoint, when not nil, is called every CheckpointEvery steps
	// (0: never) and when the run stops; an error stops the run.
	Checkpoint      func(s *State) error
	CheckpointEvery int
	// Model and Windows are the distillation term's (Distill), used when
	// Loss.KL > 0; KLSteps is how many of the windows' steps each Adam
	// step draws (SampleRefs seeded by the step's number, so a resumed
	// run draws what an uninterrupted one would; 0: every step).
	Model   *llama.Model
	Windows []Window
	KLSteps int
}

// Train runs Adam (beta1 0.9, beta2 0.999, eps 1e-8) on the full batch of
// examples from s.Step to o.Steps. Once ctx is done it stops before the
// next step, checkpoints and returns ctx's error, wrapped: s then holds
// every step taken.
func Train(ctx context.Context, s *State, exs []Example, o TrainOptions) error {
	if o.LR == 0 {
		o.LR = DefaultLR
	}
	const b1, b2, eps = 0.9, 0.999, 1e-8
	save := func() error {
		if o.Checkpoint == nil {
			return nil
		}
		return o.Checkpoint(s)
	}
	for s.Step < o.Steps {
		if err := ctx.Err(); err != nil {
			if cerr := save(); cerr != nil {
				return cerr
			}
			return fmt.Errorf("router: stopped at step %d: %w", s.Step, err)
		}
		g, err := Loss(s.Params, exs, o.Loss)
		if err != nil {
			return err
		}
		if o.Loss.KL > 0 {
			refs := SampleRefs(Refs(o.Windows), o.KLSteps, uint64(s.Step))
			if err := Distill(o.Model, s.Params, o.Windows, refs, o.Loss, g); err != nil {
				return err
			}
		}
		if !o.Loss.Recency {
			clear(g.Recency) // the weights stay where they are
		}
		x, d := s.Params.flat(), g.flat()
		s.Step++
		c1, c2 := 1-math.Pow(b1, float64(s.Step)), 1-math.Pow(b2, float64(s.Step))
		for i, gi := range d {
			s.M[i] = b1*s.M[i] + (1-b1)*gi
			s.V[i] = b2*s.V[i] + (1-b2)*gi*gi
			x[i] -= o.LR * (s.M[i] / c1) / (math.Sqrt(s.V[i]/c2) + eps)
		}
		s.Params.unflat(x)
		s.Loss = g.Loss
		if o.Progress != nil {
			o.Progress(s, g)
		}
		if o.CheckpointEvery > 0 && s.Step%o.CheckpointEvery == 0 {
			if err := save(); err != nil {
				return err
			}
		}
	}
	return save()
}

// flat is W, then Bias, Tau and Recency in one slice.
func (p *Params) flat() []float64 {
	var x []float64
	for _, w := range p.W {
		x = append(x, w...)
	}
	x = append(x, p.Bias...)
	x = append(x, p.Tau...)
	return append(x, p.Recency...)
}

func (p *Params) unflat(x []float64) {
	for _, w := range p.W {
		x = x[copy(w, x):]
	}
	x = x[copy(p.Bias, x):]
	x = x[copy(p.Tau, x):]
	copy(p.Recency, x)
}

func (g *Grad) flat() []float64 {
	var x []float64
	for _, w := range g.W {
		x = append(x, w...)
	}
	x = append(x, g.Bias...)
	x = append(x, g.Tau...)
	return append(x, g.Recency...)
}

// FillRecency gives a state saved before the recency weights existed (nil
// Params.Recency) zero weights and zero moments for them, which flat puts
// last; any other state is left as it is.
func (s *State) FillRecency() {
	p := s.Params
	if p == nil || p.Recency != nil {
		return
	}
	g := p.Groups()
	p.Recency = make([]float64, g)
	if n := len(p.flat()); len(s.M) == n-g && len(s.V) == n-g {
		s.M = append(s.M, make([]float64, g)...)
		s.V = append(s.V, make([]float64, g)...)
	}
}

// Save writes s to path as JSON, atomically (a temporary file renamed).
func (s *State) Save(path string) error {
	b, err := json.Marshal(s)
	if err != nil {
		return fmt.Errorf("router: checkpoint: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("router: checkpoint: %w", err)
	}
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return fmt.Errorf("router: checkpoint: %w", err)
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("router: checkpoint: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("router: checkpoint: %w", err)
	}
	return nil
}

// LoadState reads a checkpoint Save wrote. Errors wrap ErrInvalidArgument
// for a checkpoint that does not parse or whose shapes disagree.
func LoadState(path string) (*State, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("router: checkpoint: %w", err)
	}
	var s State
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("%w: checkpoint %s: %v", ErrInvalidArgument, path, err)
	}
	if s.Params == nil {
		return nil, fmt.Errorf("%w: checkpoint %s: no routers", ErrInvalidArgument, path)
	}
	s.FillRecency()
	if err := s.Params.check(); err != nil {
		return nil, fmt.Errorf("checkpoint %s: %w", path, err)
	}
	if n := len(s.Params.flat()); len(s.M) != n || len(s.V) != n || s.Step < 0 {
		return nil, fmt.Errorf("%w: checkpoint %s: %d and %d moments for %d parameters, step %d", ErrInvalidArgument, path, len(s.M), len(s.V), n, s.Step)
	}
	return &s, nil
}
