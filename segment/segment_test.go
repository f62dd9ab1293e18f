package segment

import (
	"errors"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/kvstore/kvstore/format"
)

var (
	nan  = float32(math.NaN())
	pinf = float32(math.Inf(1))
	ninf = float32(math.Inf(-1))
)

// ones returns n surprisals of 1 with the given tokens set to v.
func ones(n int, v float32, at ...int) []float32 {
	h := make([]float32, n)
	for i := range h {
		h[i] = 1
	}
	for _, t := range at {
		h[t] = v
	}
	return h
}

func seq(lo, hi int) []int {
	var out []int
	for i := lo; i < hi; i++ {
		out = append(out, i)
	}
	return out
}

func TestSplitTable(t *testing.T) {
	withNaN := ones(60, 10, 30)
	withNaN[0], withNaN[10], withNaN[45] = nan, nan, nan
	withInf := ones(60, 1)
	withInf[5], withInf[40], withInf[50] = pinf, ninf, nan
	tests := []struct {
		name       string
		h          []float32
		opts       Options
		spans      []Span
		anchors    []int
		boundaries []int
	}{
		{name: "empty", h: nil},
		{name: "one token", h: []float32{3}, spans: []Span{{0, 1, false}}, anchors: []int{0}},
		{name: "short constant", h: ones(3, 1),
			spans: []Span{{0, 3, false}}, anchors: []int{0, 1, 2}},
		{name: "constant", h: ones(20, 2.5),
			spans: []Span{{0, 20, true}}, anchors: seq(0, 4)},
		{name: "constant split by max span", h: ones(1100, 0.7),
			spans: []Span{{0, 367, true}, {367, 734, true}, {734, 1100, true}}, anchors: seq(0, 4)},
		{name: "one spike", h: ones(40, 10, 20),
			spans: []Span{{0, 20, true}, {20, 40, true}}, anchors: []int{0, 1, 2, 3, 20}, boundaries: []int{20}},
		{name: "spike too close is suppressed but anchored", h: ones(60, 10, 20, 25),
			spans: []Span{{0, 20, true}, {20, 60, true}}, anchors: []int{0, 1, 2, 3, 20, 25}, boundaries: []int{20}},
		{name: "short tail merges", h: ones(40, 10, 36),
			spans: []Span{{0, 40, true}}, anchors: []int{0, 1, 2, 3, 36}},
		{name: "spike at token 0 starts nothing", h: ones(40, 10, 0),
			spans: []Span{{0, 40, true}}, anchors: []int{0, 1, 2, 3}},
		{name: "min span 1 keeps adjacent spikes", h: ones(12, 10, 5, 6), opts: Options{MinSpan: 1, MinFactored: 3},
			spans:   []Span{{0, 5, true}, {5, 6, false}, {6, 12, true}},
			anchors: []int{0, 1, 2, 3, 5, 6}, boundaries: []int{5, 6}},
		{name: "no sinks", h: ones(40, 10, 20), opts: Options{Sinks: -1},
			spans: []Span{{0, 20, true}, {20, 40, true}}, anchors: []int{20}, boundaries: []int{20}},
		{name: "more sinks than tokens", h: ones(3, 1), opts: Options{Sinks: 10},
			spans: []Span{{0, 3, false}}, anchors: []int{0, 1, 2}},
		{name: "boundary then max split", h: ones(100, 10, 30), opts: Options{MinSpan: 4, MaxSpan: 32},
			spans:   []Span{{0, 30, true}, {30, 54, true}, {54, 77, true}, {77, 100, true}},
			anchors: []int{0, 1, 2, 3, 30}, boundaries: []int{30}},
		{name: "nan ignored", h: withNaN,
			spans: []Span{{0, 30, true}, {30, 60, true}}, anchors: []int{0, 1, 2, 3, 30}, boundaries: []int{30}},
		{name: "inf is a boundary, -inf is not", h: withInf, opts: Options{MinSpan: 2, MaxSpan: 64},
			spans: []Span{{0, 5, true}, {5, 60, true}}, anchors: []int{0, 1, 2, 3, 5}, boundaries: []int{5}},
		{name: "all nan", h: []float32{nan, nan, nan, nan, nan, nan},
			spans: []Span{{0, 6, true}}, anchors: seq(0, 4)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			seg, err := Split(tc.h, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			if seg.Tokens != len(tc.h) {
				t.Errorf("tokens %d, want %d", seg.Tokens, len(tc.h))
			}
			if !reflect.DeepEqual(seg.Spans, tc.spans) && (len(seg.Spans) != 0 || len(tc.spans) != 0) {
				t.Errorf("spans\n got %v\nwant %v", seg.Spans, tc.spans)
			}
			if !slices.Equal(seg.Anchors, tc.anchors) {
				t.Errorf("anchors %v, want %v", seg.Anchors, tc.anchors)
			}
			if !slices.Equal(seg.Boundaries, tc.boundaries) {
				t.Errorf("boundaries %v, want %v", seg.Boundaries, tc.boundaries)
			}
		})
	}
}

func TestSplitStats(t *testing.T) {
	h := []float32{nan, 1, 2, 3, pinf, 4, ninf, 10}
	seg, err := Split(h, Options{Alpha: 0.5, AnchorAlpha: 1.5})
	if err != nil {
		t.Fatal(err)
	}
	finite := []float64{1, 2, 3, 4, 10}
	var mean, ss float64
	for _, v := range finite {
		mean += v / 5
	}
	for _, v := range finite {
		ss += (v - mean) * (v - mean)
	}
	std := math.Sqrt(ss / 5)
	if math.Abs(seg.Mean-mean) > 1e-12 || math.Abs(seg.Std-std) > 1e-12 {
		t.Errorf("mean, std = %v, %v; want %v, %v", seg.Mean, seg.Std, mean, std)
	}
	if math.Abs(seg.Threshold-(mean+0.5*std)) > 1e-12 || math.Abs(seg.AnchorThreshold-(mean+1.5*std)) > 1e-12 {
		t.Errorf("thresholds %v, %v", seg.Threshold, seg.AnchorThreshold)
	}

	// A constant whose float64 sum would not divide back exactly.
	c := make([]float32, 1001)
	for i := range c {
		c[i] = 0.1
	}
	seg, _ = Split(c, Options{})
	if seg.Std != 0 || seg.Mean != float64(float32(0.1)) {
		t.Errorf("constant: mean %v std %v", seg.Mean, seg.Std)
	}
	seg, _ = Split([]float32{nan, pinf}, Options{})
	if !math.IsNaN(seg.Mean) || !math.IsNaN(seg.Std) || !math.IsNaN(seg.Threshold) {
		t.Errorf("no finite values: mean %v std %v threshold %v", seg.Mean, seg.Std, seg.Threshold)
	}
}

// TestSplitAnchorThreshold checks that a suppressed candidate is an anchor
// only above the second threshold, and that a lower AnchorAlpha anchors
// tokens that start no span.
func TestSplitAnchorThreshold(t *testing.T) {
	h := ones(80, 1)
	h[30] = 20
	h[35] = 4.5 // between the two thresholds (checked below), suppressed by MinSpan
	h[60] = 4.5
	seg, err := Split(h, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tok := range []int{35, 60} {
		if v := float64(h[tok]); v <= seg.Threshold || v >= seg.AnchorThreshold {
			t.Fatalf("test data: h[%d]=%v not between thresholds %v and %v", tok, v, seg.Threshold, seg.AnchorThreshold)
		}
	}
	if want := []int{30, 60}; !slices.Equal(seg.Boundaries, want) {
		t.Errorf("boundaries %v, want %v", seg.Boundaries, want)
	}
	if want := []int{0, 1, 2, 3, 30, 60}; !slices.Equal(seg.Anchors, want) {
		t.Errorf("anchors %v, want %v", seg.Anchors, want)
	}
	seg, _ = Split(h, Options{AnchorAlpha: 0.5})
	if want := []int{0, 1, 2, 3, 30, 35, 60}; !slices.Equal(seg.Anchors, want) {
		t.Errorf("low anchor alpha: anchors %v, want %v", seg.Anchors, want)
	}
}

func TestSplitRejectsOptions(t *testing.T) {
	for _, o := range []Options{
		{Alpha: math.NaN()},
		{AnchorAlpha: math.Inf(1)},
		{MinSpan: -1},
		{MinSpan: 10, MaxSpan: 19},
		{MinFactored: -2},
	} {
		if _, err := Split(ones(10, 1), o); !errors.Is(err, format.ErrInvalidArgument) {
			t.Errorf("%+v: err %v, want ErrInvalidArgument", o, err)
		}
	}
}

// TestSplitInvariants checks, on random heavy-tailed surprisals under
// several option sets, everything Split guarantees, and that it is
// deterministic and leaves its input alone.
func TestSplitInvariants(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	optSets := []Options{{}, {MinSpan: 1, MaxSpan: 8, MinFactored: 2}, {Alpha: -0.5, MinSpan: 3, MaxSpan: 7},
		{Alpha: 2, AnchorAlpha: 0.5, Sinks: -1}}
	for iter := 0; iter < 200; iter++ {
		n := rng.IntN(700)
		h := make([]float32, n)
		for i := range h {
			h[i] = float32(rng.ExpFloat64() * 2)
			switch rng.IntN(50) {
			case 0:
				h[i] = nan
			case 1:
				h[i] = pinf
			}
		}
		orig := slices.Clone(h)
		opts := optSets[iter%len(optSets)]
		seg, err := Split(h, opts)
		if err != nil {
			t.Fatal(err)
		}
		again, _ := Split(h, opts)
		if !reflect.DeepEqual(seg.Spans, again.Spans) || !slices.Equal(seg.Anchors, again.Anchors) {
			t.Fatal("not deterministic")
		}
		if !slices.EqualFunc(h, orig, func(a, b float32) bool { return math.Float32bits(a) == math.Float32bits(b) }) {
			t.Fatal("input modified")
		}
		checkInvariants(t, h, seg, *opts.EnsureDefaults())
	}
}

func checkInvariants(t *testing.T, h []float32, seg *Segmentation, o Options) {
	t.Helper()
	next := 0
	for i, s := range seg.Spans {
		if s.Start != next || s.End <= s.Start || s.Len() > o.MaxSpan {
			t.Fatalf("span %d %+v after %d (max %d)", i, s, next, o.MaxSpan)
		}
		if len(seg.Spans) > 1 && s.Len() < o.MinSpan {
			t.Fatalf("span %d %+v shorter than min %d", i, s, o.MinSpan)
		}
		if s.Factored != (s.Len() >= o.MinFactored) {
			t.Fatalf("span %+v factored wrong (min %d)", s, o.MinFactored)
		}
		for tok := s.Start; tok < s.End; tok += max(1, s.Len()/3) {
			if seg.SpanOf(tok) != i {
				t.Fatalf("SpanOf(%d) = %d, want %d", tok, seg.SpanOf(tok), i)
			}
		}
		next = s.End
	}
	if next != len(h) || seg.SpanOf(-1) != -1 || seg.SpanOf(len(h)) != -1 {
		t.Fatalf("spans end at %d of %d", next, len(h))
	}
	if !slices.IsSorted(seg.Anchors) || len(slices.Compact(slices.Clone(seg.Anchors))) != len(seg.Anchors) {
		t.Fatalf("anchors not sorted and unique: %v", seg.Anchors)
	}
	for _, b := range seg.Boundaries {
		if _, ok := slices.BinarySearch(seg.Anchors, b); !ok {
			t.Fatalf("boundary %d not an anchor", b)
		}
		if !(math.IsInf(float64(h[b]), 1) || float64(h[b]) > seg.Threshold) {
			t.Fatalf("boundary %d has surprisal %v <= threshold %v", b, h[b], seg.Threshold)
		}
		if i := seg.SpanOf(b); seg.Spans[i].Start != b {
			t.Fatalf("boundary %d does not start a span", b)
		}
	}
	for _, a := range seg.Anchors {
		isBoundary := slices.Contains(seg.Boundaries, a)
		if a >= o.Sinks && !isBoundary && !(math.IsInf(float64(h[a]), 1) || float64(h[a]) > seg.AnchorThreshold) {
			t.Fatalf("anchor %d (h=%v) has no reason", a, h[a])
		}
	}
}
