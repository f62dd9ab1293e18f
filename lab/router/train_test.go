package router

import (
	"context"
	"errors"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"
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
	if _, err := FromArtifacts(arts, 2, 2, 16); err == nil {
		t.Fatal("decoded for another head dim")
	}
}
