package prune

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

func TestMassKeep(t *testing.T) {
	peaked := []float32{0.5, 0.1, 0.3, 0.1} // sorted: 0.5 0.3 0.1 0.1
	flat := []float32{0.25, 0.25, 0.25, 0.25}
	for _, c := range []struct {
		name    string
		scores  [][]float32
		share   float64
		minKeep int
		want    int
	}{
		{"peaked 0.8", [][]float32{peaked}, 0.8, 1, 2},
		{"peaked 0.81", [][]float32{peaked}, 0.81, 1, 3},
		{"peaked 0.5", [][]float32{peaked}, 0.5, 1, 1},
		{"peaked all", [][]float32{peaked}, 1, 1, 4},
		{"flat 0.5", [][]float32{flat}, 0.5, 1, 2},
		{"flat 0.51", [][]float32{flat}, 0.51, 1, 3},
		{"the most spread head sets the budget", [][]float32{peaked, flat}, 0.8, 1, 4},
		{"floor", [][]float32{peaked}, 0.5, 3, 3},
		{"floor clipped to tokens", [][]float32{peaked}, 0.5, 9, 4},
		{"zeros beyond the mass", [][]float32{{0, 2, 0, 0}}, 1, 1, 1},
		{"all zero: the floor", [][]float32{{0, 0, 0, 0}}, 0.9, 2, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := MassKeep(c.scores, c.share, c.minKeep)
			if err != nil || got != c.want {
				t.Fatalf("MassKeep = %d, %v; want %d", got, err, c.want)
			}
		})
	}
}

func TestMassKeepInvalid(t *testing.T) {
	ok := [][]float32{{1, 2, 3}}
	for _, c := range []struct {
		name    string
		scores  [][]float32
		share   float64
		minKeep int
	}{
		{"no rows", nil, 0.9, 1},
		{"share 0", ok, 0, 1},
		{"share above 1", ok, 1.01, 1},
		{"share NaN", ok, math.NaN(), 1},
		{"min 0", ok, 0.9, 0},
		{"ragged", [][]float32{{1, 2, 3}, {1, 2}}, 0.9, 1},
		{"empty row", [][]float32{{}}, 0.9, 1},
		{"negative score", [][]float32{{1, -1, 3}}, 0.9, 1},
		{"NaN score", [][]float32{{1, float32(math.NaN()), 3}}, 0.9, 1},
		{"infinite score", [][]float32{{1, float32(math.Inf(1)), 3}}, 0.9, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			if k, err := MassKeep(c.scores, c.share, c.minKeep); !errors.Is(err, ErrInvalidArgument) {
				t.Fatalf("MassKeep = %d, %v; want ErrInvalidArgument", k, err)
			}
		})
	}
}

// TestMassCovers checks on random scores that the budget is the least one
// covering the share in every row, that it grows with the share, and that
// Mass keeps that many of each row's best rows.
func TestMassCovers(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	const layers, heads, tokens = 3, 2, 200
	scores := make([][]float32, layers*heads)
	for g := range scores {
		scores[g] = make([]float32, tokens)
		for i := range scores[g] {
			scores[g][i] = float32(math.Pow(rng.Float64(), float64(1+3*g))) // heads from spread to peaked
		}
	}
	last := 0
	for _, share := range []float64{0.5, 0.8, 0.9, 0.95, 0.99, 1} {
		s, k, err := Mass(layers, heads, tokens, scores, share, 1, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Validate(); err != nil {
			t.Fatal(err)
		}
		if n, ok := s.Rows(); !ok || n != k {
			t.Fatalf("share %v: set keeps %d rows (equal %v), budget %d", share, n, ok, k)
		}
		if k < last {
			t.Errorf("share %v: budget %d below the smaller share's %d", share, k, last)
		}
		last = k
		covered := false
		for g, sc := range scores {
			total, kept := 0.0, 0.0
			for _, x := range sc {
				total += float64(x)
			}
			for _, p := range s.Keep[g] {
				kept += float64(sc[p])
			}
			if kept < share*total*(1-1e-6) {
				t.Errorf("share %v: row %d keeps %.4f of %.4f", share, g, kept, total)
			}
			// The best k-1 rows of the most spread row fall short.
			best := slices.Sorted(slices.Values(sc))
			slices.Reverse(best)
			short := 0.0
			for _, x := range best[:k-1] {
				short += float64(x)
			}
			if short < share*total*(1-1e-6) {
				covered = true
			}
		}
		if !covered {
			t.Errorf("share %v: %d rows is not the least budget: every row covers with %d", share, k, k-1)
		}
	}
}

func TestMassShape(t *testing.T) {
	if _, _, err := Mass(2, 2, 4, [][]float32{{1, 2, 3, 4}}, 0.9, 1, nil); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("1 score row for 2 x 2: %v", err)
	}
}
