package prune

import (
	"errors"
	"math"
	"slices"
	"testing"
)

func TestCalibrate(t *testing.T) {
	ladder := []float64{0.25, 0.5, 0.75, 1}
	loss := map[float64]float64{0.25: 0.03, 0.5: 0.008, 0.75: 0.002, 1: 0}
	for _, c := range []struct {
		name      string
		bound     float64
		wantF     float64
		wantAsked []float64
	}{
		{"loose: the least", 0.05, 0.25, []float64{0.25}},
		{"middle", 0.01, 0.5, []float64{0.25, 0.5}},
		{"at the bound", 0.008, 0.5, []float64{0.25, 0.5}},
		{"tight", 0.005, 0.75, []float64{0.25, 0.5, 0.75}},
		{"none within: the last", -1, 1, []float64{0.25, 0.5, 0.75, 1}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var asked []float64
			f, l, err := Calibrate(ladder, c.bound, func(x float64) (float64, error) {
				asked = append(asked, x)
				return loss[x], nil
			})
			if err != nil || f != c.wantF || l != loss[c.wantF] || !slices.Equal(asked, c.wantAsked) {
				t.Fatalf("Calibrate = %v, %v, %v after probing %v; want %v, %v after %v", f, l, err, asked, c.wantF, loss[c.wantF], c.wantAsked)
			}
		})
	}
}

func TestCalibrateInvalid(t *testing.T) {
	ok := func(float64) (float64, error) { return 0, nil }
	for _, c := range []struct {
		name   string
		ladder []float64
		bound  float64
		probe  func(float64) (float64, error)
	}{
		{"empty ladder", nil, 0.01, ok},
		{"zero fraction", []float64{0, 1}, 0.01, ok},
		{"above 1", []float64{0.5, 1.5}, 0.01, ok},
		{"not increasing", []float64{0.5, 0.5}, 0.01, ok},
		{"NaN bound", []float64{0.5}, math.NaN(), ok},
		{"no probe", []float64{0.5}, 0.01, nil},
		{"NaN loss", []float64{0.5}, 0.01, func(float64) (float64, error) { return math.NaN(), nil }},
	} {
		t.Run(c.name, func(t *testing.T) {
			if _, _, err := Calibrate(c.ladder, c.bound, c.probe); !errors.Is(err, ErrInvalidArgument) {
				t.Fatalf("Calibrate: %v, want ErrInvalidArgument", err)
			}
		})
	}
	boom := errors.New("boom")
	if _, _, err := Calibrate([]float64{0.5, 1}, 0.01, func(float64) (float64, error) { return 0, boom }); !errors.Is(err, boom) {
		t.Errorf("probe error: %v", err)
	}
}
