package segment

import (
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/kvstore/kvstore/format"
)

func TestWeights(t *testing.T) {
	tests := []struct {
		name string
		h    []float32
		want []float64
	}{
		{"proportional", []float32{1, 3, 0, 4}, []float64{0.125, 0.375, 0, 0.5}},
		{"nan and negatives weigh 0", []float32{nan, 2, -5, 2, ninf}, []float64{0, 0.5, 0, 0.5, 0}},
		{"all zero: plain mean", []float32{0, 0, 0, 0}, []float64{0.25, 0.25, 0.25, 0.25}},
		{"all nan: plain mean", []float32{nan, nan}, []float64{0.5, 0.5}},
		{"inf takes all", []float32{3, pinf, 1, pinf}, []float64{0, 0.5, 0, 0.5}},
		{"empty", nil, []float64{}},
	}
	for _, tc := range tests {
		if got := Weights(tc.h); !slices.Equal(got, tc.want) {
			t.Errorf("%s: Weights(%v) = %v, want %v", tc.name, tc.h, got, tc.want)
		}
	}
}

func TestSummarize(t *testing.T) {
	keys := []float32{
		1, 0, 2,
		3, 4, -2,
		0, 0, 6,
	}
	values := []float32{
		1, 1, 1,
		2, 2, 2,
		-1, 5, 0,
	}
	h := []float32{1, 1, 2} // weights 1/4, 1/4, 1/2
	p := &Projection{Dim: 2, HeadDim: 3, W: []float32{1, 0, 0, 0, 1, 1}}
	s, err := Summarize(keys, values, 3, h, p)
	if err != nil {
		t.Fatal(err)
	}
	if want := []float32{1, 1, 3}; !slices.Equal(s.Key, want) {
		t.Errorf("key %v, want %v", s.Key, want)
	}
	if want := []float32{0.25, 3.25, 0.75}; !slices.Equal(s.Value, want) {
		t.Errorf("value %v, want %v", s.Value, want)
	}
	if want := []float32{1, 4}; !slices.Equal(s.Proj, want) {
		t.Errorf("proj %v, want %v", s.Proj, want)
	}
	plain, _ := Summarize(keys, values, 3, []float32{nan, 0, nan}, nil)
	if want := []float32{4.0 / 3, 4.0 / 3, 2}; !slices.Equal(plain.Key, want) || plain.Proj != nil {
		t.Errorf("plain mean key %v proj %v, want %v and nil", plain.Key, plain.Proj, want)
	}

	bad := []struct {
		name         string
		keys, values []float32
		headDim      int
		h            []float32
		p            *Projection
	}{
		{"no tokens", nil, nil, 3, nil, nil},
		{"short keys", keys[:8], values, 3, h, nil},
		{"short values", keys, values[:3], 3, h, nil},
		{"head dim", keys, values, 0, h, nil},
		{"projection head dim", keys, values, 3, h, &Projection{Dim: 1, HeadDim: 2, W: []float32{1, 1}}},
		{"nan key", append([]float32{float32(math.NaN())}, keys[1:]...), values, 3, h, nil},
		{"inf value", keys, append([]float32{pinf}, values[1:]...), 3, h, nil},
	}
	for _, tc := range bad {
		if _, err := Summarize(tc.keys, tc.values, tc.headDim, tc.h, tc.p); !errors.Is(err, format.ErrInvalidArgument) {
			t.Errorf("%s: err %v, want ErrInvalidArgument", tc.name, err)
		}
	}
}

func TestSummarizeSpans(t *testing.T) {
	const tokens, hd = 10, 4
	keys := make([]float32, tokens*hd)
	values := make([]float32, tokens*hd)
	h := make([]float32, tokens)
	for i := range keys {
		keys[i] = float32(i%7) - 3
		values[i] = float32(i%5) * 0.5
	}
	for i := range h {
		h[i] = float32(i%3) + 0.5
	}
	p := &Projection{Dim: 2, HeadDim: hd, W: []float32{1, 0, 0, 1, 0, 2, -1, 0}}
	spans := []Span{{0, 3, false}, {3, 10, true}}
	sums, err := SummarizeSpans(keys, values, hd, h, spans, p)
	if err != nil {
		t.Fatal(err)
	}
	for i, sp := range spans {
		one, err := Summarize(keys[sp.Start*hd:sp.End*hd], values[sp.Start*hd:sp.End*hd], hd, h[sp.Start:sp.End], p)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(sums[i].Key, one.Key) || !slices.Equal(sums[i].Value, one.Value) || !slices.Equal(sums[i].Proj, one.Proj) {
			t.Errorf("span %d differs from Summarize", i)
		}
	}
	flat, err := ProjectedKeys(sums, 2)
	if err != nil {
		t.Fatal(err)
	}
	if want := append(slices.Clone(sums[0].Proj), sums[1].Proj...); !slices.Equal(flat, want) {
		t.Errorf("ProjectedKeys %v, want %v", flat, want)
	}
	if _, err := ProjectedKeys(sums, 3); !errors.Is(err, format.ErrInvalidArgument) {
		t.Errorf("ProjectedKeys with a wrong dim: %v", err)
	}
	for _, sp := range [][]Span{{{0, 11, true}}, {{-1, 2, true}}, {{4, 4, true}}} {
		if _, err := SummarizeSpans(keys, values, hd, h, sp, p); !errors.Is(err, format.ErrInvalidArgument) {
			t.Errorf("spans %v: err %v", sp, err)
		}
	}
	if _, err := SummarizeSpans(keys[:4], values, hd, h, spans, p); !errors.Is(err, format.ErrInvalidArgument) {
		t.Errorf("short keys: err %v", err)
	}
}
