package rankgate

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/kvstore/kvstore/reconstruct"
)

// TestEnergyPolicyIsSVD: EnergyPolicy keeps the rank reconstruct.SVD's
// energy threshold keeps.
func TestEnergyPolicyIsSVD(t *testing.T) {
	const rows, cols, r = 48, 32, 16
	rng := rand.New(rand.NewPCG(6, 6))
	x := make([]float32, rows*cols)
	for i := range x {
		x[i] = float32(rng.NormFloat64() * math.Pow(0.85, float64(i%cols)))
	}
	s, err := NewSample(x, rows, cols, 0, 1, false, r, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range []float64{0.3, 0.6, 0.9, 0.99} {
		f, err := reconstruct.SVD(x, rows, cols, reconstruct.SVDOptions{MaxRank: r, Energy: e, Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		if got := EnergyPolicy(e)(s); got != f.Rank {
			t.Fatalf("energy %v: policy keeps %d, SVD %d", e, got, f.Rank)
		}
	}
}

// TestEvaluateAndMatch: Evaluate's figures follow the ranks, and
// MatchEnergy finds a threshold within the target bytes.
func TestEvaluateAndMatch(t *testing.T) {
	samples := synthSamples(200, 8, 13)
	none, all := Evaluate(samples, func(*Sample) int { return 0 }), Evaluate(samples, func(s *Sample) int { return s.Avail })
	if none.TotalBytes != 0 || none.Err.Worst != 1 || all.Err.Median >= none.Err.Median || all.TotalBytes <= 0 {
		t.Fatalf("rank 0: %+v; all: %+v", none, all)
	}
	target := all.TotalBytes / 3
	e := MatchEnergy(samples, target)
	got := Evaluate(samples, EnergyPolicy(e)).TotalBytes
	if got > target || got < 0.8*target {
		t.Fatalf("energy %v stores %v, target %v", e, got, target)
	}
	c := MatchCost(samples, target)
	cs := Evaluate(samples, CostPolicy(c))
	if cs.TotalBytes > target || cs.TotalBytes < 0.8*target || CostPolicy(0)(samples[0]) != samples[0].Avail {
		t.Fatalf("cost threshold %v stores %v, target %v", c, cs.TotalBytes, target)
	}
}
