package router

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"

	"github.com/kvstore/kvstore/store"
)

// TestTrainLowersLoss trains on a random problem and checks that the loss
// falls, and that a run stopped half way and resumed from its checkpoint
// ends where an uninterrupted one does.
func TestTrainLowersLoss(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	p, exs := randomProblem(rng, 1, 2, 4, 8, 9, 4, 2)
	o := TrainOptions{Loss: Options{Budget: 1, Share: 0.3}, Steps: 60, LR: 0.02}
	first, err := Loss(p, exs, o.Loss)
	if err != nil {
		t.Fatal(err)
	}
	whole := NewState(p.Clone())
	if err := Train(context.Background(), whole, exs, o); err != nil {
		t.Fatal(err)
	}
	last, err := Loss(whole.Params, exs, o.Loss)
	if err != nil {
		t.Fatal(err)
	}
	if !(last.Loss < 0.8*first.Loss) {
		t.Fatalf("loss %v -> %v after %d steps", first.Loss, last.Loss, o.Steps)
	}

	path := filepath.Join(t.TempDir(), "ckpt.json")
	ctx, cancel := context.WithCancel(context.Background())
	half := o
	half.Checkpoint = func(s *State) error { return s.Save(path) }
	half.Progress = func(s *State, _ *Grad) {
		if s.Step == 25 {
			cancel()
		}
	}
	if err := Train(ctx, NewState(p.Clone()), exs, half); !errors.Is(err, context.Canceled) {
		t.Fatalf("stopped run: %v, want context.Canceled", err)
	}
	s, err := LoadState(path)
	if err != nil {
		t.Fatal(err)
	}
	if s.Step != 25 {
		t.Fatalf("checkpoint at step %d, want 25", s.Step)
	}
	if err := Train(context.Background(), s, exs, o); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(s.Params.flat(), whole.Params.flat()) {
		t.Fatal("resumed run ends elsewhere than the uninterrupted one")
	}
}

// TestTrainDefaultLR takes one step with no learning rate given: Adam's
// first step moves each parameter with a gradient by DefaultLR times
// |g|/(|g|+eps), its moments' ratio, and none by more.
func TestTrainDefaultLR(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	p, exs := randomProblem(rng, 1, 2, 4, 8, 9, 4, 2)
	o := TrainOptions{Loss: Options{Budget: 1, Share: 0.3}, Steps: 1}
	g, err := Loss(p, exs, o.Loss)
	if err != nil {
		t.Fatal(err)
	}
	s := NewState(p.Clone())
	if err := Train(context.Background(), s, exs, o); err != nil {
		t.Fatal(err)
	}
	before, after, grad := p.flat(), s.Params.flat(), g.flat()
	clear(grad[len(grad)-p.Groups():]) // recency: not trained without Options.Recency
	moved := 0
	for i, gi := range grad {
		d := math.Abs(after[i] - before[i])
		switch {
		case gi != 0 && math.Abs(d-DefaultLR*math.Abs(gi)/(math.Abs(gi)+1e-8)) > 1e-12:
			t.Fatalf("parameter %d (gradient %v) moved by %v, want %v", i, gi, d, DefaultLR*math.Abs(gi)/(math.Abs(gi)+1e-8))
		case gi == 0 && d != 0:
			t.Fatalf("parameter %d without a gradient moved by %v", i, d)
		case d > DefaultLR*(1+1e-9):
			t.Fatalf("parameter %d moved by %v, more than %v", i, d, DefaultLR)
		}
		if d > 0 {
			moved++
		}
	}
	if moved == 0 {
		t.Fatal("no parameter moved")
	}
}

// Train moves the recency weights only with Options.Recency, and a state
// saved before they existed resumes with zero weights and moments.
func TestTrainRecency(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	p, exs := randomProblem(rng, 1, 2, 4, 8, 9, 4, 2)
	o := TrainOptions{Loss: Options{Budget: 1, Share: 0.3}, Steps: 10, LR: 0.02}
	fixed := NewState(p.Clone())
	if err := Train(context.Background(), fixed, exs, o); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(fixed.Params.Recency, p.Recency) || slices.Equal(fixed.Params.Bias, p.Bias) {
		t.Fatalf("without Recency: recency %v -> %v, bias %v -> %v", p.Recency, fixed.Params.Recency, p.Bias, fixed.Params.Bias)
	}
	o.Loss.Recency = true
	moved := NewState(p.Clone())
	if err := Train(context.Background(), moved, exs, o); err != nil {
		t.Fatal(err)
	}
	for g, r := range moved.Params.Recency {
		if r == p.Recency[g] {
			t.Fatalf("with Recency: group %d's weight stayed at %v", g, r)
		}
	}

	old := NewState(p.Clone())
	g := old.Params.Groups()
	old.Params.Recency = nil
	old.M, old.V = old.M[:len(old.M)-g], old.V[:len(old.V)-g]
	old.FillRecency()
	if len(old.Params.Recency) != g || len(old.M) != len(old.Params.flat()) || len(old.V) != len(old.M) {
		t.Fatalf("filled: %d weights, %d and %d moments for %d parameters", len(old.Params.Recency), len(old.M), len(old.V), len(old.Params.flat()))
	}
	for _, r := range old.Params.Recency {
		if r != 0 {
			t.Fatalf("filled weights %v, want 0", old.Params.Recency)
		}
	}
}

// TestArtifactsRoundTrip encodes routers as the store's artifacts and
// decodes them (f32: the values rounded once).
func TestArtifactsRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	p, _ := randomProblem(rng, 2, 2, 3, 8, 2, 1, 2)
	arts, err := p.Artifacts()
	if err != nil {
		t.Fatal(err)
	}
	q, err := FromArtifacts(arts, 2, 2, 8)
	if err != nil {
		t.Fatal(err)
	}
	round := func(x []float64) []float64 { return to64(to32(x)) }
	if !slices.Equal(q.flat(), round(p.flat())) {
		t.Fatal("decoded routers differ")
	}
	if _, err := FromArtifacts(arts[:2], 2, 2, 8); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("two artifacts of three: %v", err)
	}
	// Routers stored before the recency weights: all 0.
	var before []Artifact
	for _, a := range arts {
		if a.Name != store.ArtifactRouterRecency {
			before = append(before, a)
		}
	}
	if len(before) != 3 {
		t.Fatalf("%d artifacts besides the recency weights, want 3", len(before))
	}
	q, err = FromArtifacts(before, 2, 2, 8)
	if err != nil || !slices.Equal(q.Recency, make([]float64, 4)) {
		t.Fatalf("without recency: %v, %v", q, err)
	}
	if _, err := FromArtifacts(arts, 2, 2, 16); err == nil {
		t.Fatal("decoded for another head dim")
	}
}
