package rankgate

import (
	"math"
	"slices"

	"github.com/kvstore/kvstore/store"
)

// Policy is a rule for the rank a span keeps.
type Policy func(s *Sample) int

// EnergyPolicy is span memory's default rule (reconstruct.SVD's): the
// fewest leading components whose energy reaches e of the span's, or all
// it found.
func EnergyPolicy(e float64) Policy {
	return func(s *Sample) int {
		var cum float64
		for i := range s.Avail {
			cum += s.E[i]
			if cum >= e {
				return i + 1
			}
		}
		return s.Avail
	}
}

// GatePolicy is spanmem.Build's rule with gate g: the components whose
// gate exceeds 1/2, of those the SVD found.
func GatePolicy(g *store.RankGate) Policy {
	return func(s *Sample) int {
		m := g.Gates(s.Features)
		r := 0
		for i := range min(s.Avail, g.MaxRank) {
			if m[i] > 0.5 {
				r++
			}
		}
		return r
	}
}

// CostPolicy keeps the leading components whose energy share exceeds t
// times their bytes share, e_i > t * Cost: with hard gates, the minimum of
// the training objective at lambda = t for each span on its own (each
// component is worth keeping exactly when it does), the rule a perfect
// g_phi would learn. It is a reference, not a deployable rule: it reads
// the whole spectrum as the gate does, but is not the trained network.
func CostPolicy(t float64) Policy {
	return func(s *Sample) int {
		r := 0
		for r < s.Avail && s.E[r] > t*s.Cost {
			r++
		}
		return r
	}
}

// Err is the relative reconstruction error ||X - X_r||_F / ||X||_F of s
// kept at rank r (exact from the spectrum: the truncated factors are an
// orthogonal projection of X).
func (s *Sample) Err(r int) float64 {
	lost := s.Tail
	for i := r; i < len(s.E); i++ {
		lost += s.E[i]
	}
	return math.Sqrt(max(0, lost))
}

// Bytes is the fraction of the span's raw bf16 rows that r components
// take.
func (s *Sample) Bytes(r int) float64 { return float64(r) * s.Cost }

// Summary is a policy's figures over samples: per span, the stored bytes
// as a fraction of raw bf16 and the relative reconstruction error.
type Summary struct {
	Bytes, Err Dist
	// TotalBytes is all spans' factor bytes over all their raw bf16 bytes.
	TotalBytes float64
	MeanRank   float64
}

// Dist is a median, a mean and a worst (largest) value.
type Dist struct{ Median, Mean, Worst float64 }

func dist(v []float64) Dist {
	s := slices.Clone(v)
	slices.Sort(s)
	var sum float64
	for _, x := range s {
		sum += x
	}
	d := Dist{Mean: sum / float64(len(s)), Worst: s[len(s)-1]}
	if n := len(s); n%2 == 1 {
		d.Median = s[n/2]
	} else {
		d.Median = (s[n/2-1] + s[n/2]) / 2
	}
	return d
}

// Evaluate applies p to every sample (at least one).
func Evaluate(samples []*Sample, p Policy) Summary {
	b, e := make([]float64, len(samples)), make([]float64, len(samples))
	var stored, raw, ranks float64
	for i, s := range samples {
		r := p(s)
		b[i], e[i] = s.Bytes(r), s.Err(r)
		w := float64(s.Rows * s.Cols * 2)
		stored += b[i] * w
		raw += w
		ranks += float64(r)
	}
	return Summary{Bytes: dist(b), Err: dist(e), TotalBytes: stored / raw, MeanRank: ranks / float64(len(samples))}
}

// MatchCost returns the CostPolicy threshold whose total bytes over
// samples come closest to total from below (bytes fall as it grows).
func MatchCost(samples []*Sample, total float64) float64 {
	lo, hi := 0.0, 1024.0
	for range 60 {
		mid := (lo + hi) / 2
		if Evaluate(samples, CostPolicy(mid)).TotalBytes <= total {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi
}

// MatchEnergy returns the energy threshold whose total bytes over samples
// come closest to total from below (bisection: bytes grow with the
// threshold).
func MatchEnergy(samples []*Sample, total float64) float64 {
	lo, hi := 0.0, 1.0
	for range 50 {
		mid := (lo + hi) / 2
		if Evaluate(samples, EnergyPolicy(mid)).TotalBytes <= total {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo
}
