package reconstruct

import (
	"errors"
	"math"
	"reflect"
	"slices"
	"testing"

	"github.com/kvstore/kvstore/format"
)

func sigmoid64(x float64) float32 { return float32(1 / (1 + math.Exp(-x))) }

func TestRoute(t *testing.T) {
	r := &Router{Dim: 2, HeadDim: 3, W: []float32{1, 0, 0, 0, 1, 0}, Bias: 0.5, Scale: 2}
	summaries := []float32{1, 0, 0, -1, 0.5, 0.5}
	q := []float32{1, 2, 3} // W q = (1, 2): dots 1, -2, 1.5
	got, err := r.Route(nil, q, summaries)
	if err != nil {
		t.Fatal(err)
	}
	want := []float32{sigmoid64(2.5), sigmoid64(-3.5), sigmoid64(3.5)}
	if !slices.Equal(got, want) {
		t.Errorf("scores %v, want %v", got, want)
	}

	// A GQA group scores each span by its best query head.
	q2 := []float32{1, 2, 3, 0, -3, 0} // second head: W q = (0, -3): dots 0, 3, -1.5
	got, _ = r.Route(nil, q2, summaries)
	want = []float32{sigmoid64(2.5), sigmoid64(6.5), sigmoid64(3.5)}
	if !slices.Equal(got, want) {
		t.Errorf("group scores %v, want %v", got, want)
	}

	// Scale 0 means 1, and dst is reused when it has room.
	r.Scale = 0
	buf := make([]float32, 0, 8)
	got, _ = r.Route(buf, q, summaries)
	if &got[0] != &buf[:1][0] {
		t.Error("dst not reused")
	}
	if want := []float32{sigmoid64(1.5), sigmoid64(-1.5), sigmoid64(2)}; !slices.Equal(got, want) {
		t.Errorf("scale 1: %v, want %v", got, want)
	}
	if got, _ := r.Route(nil, q, nil); len(got) != 0 {
		t.Errorf("no spans: %v", got)
	}
	got, _ = r.Route(nil, []float32{float32(math.NaN()), 0, 0}, summaries)
	for _, a := range got {
		if !math.IsNaN(float64(a)) {
			t.Errorf("NaN query scored %v", got)
		}
	}
	// Saturation stays finite and ordered.
	r.Bias = 200
	if got, _ := r.Route(nil, q, summaries); got[0] != 1 {
		t.Errorf("saturated score %v", got[0])
	}
	r.Bias = -200
	if got, _ := r.Route(nil, q, summaries); got[0] != 0 {
		t.Errorf("saturated score %v", got[0])
	}

	for _, tc := range []struct {
		name string
		r    Router
		q, s []float32
	}{
		{"weights", Router{Dim: 2, HeadDim: 3, W: make([]float32, 5)}, q, summaries},
		{"dims", Router{Dim: 0, HeadDim: 3}, q, summaries},
		{"query", *r, q[:2], summaries},
		{"no query", *r, nil, summaries},
		{"summaries", *r, q, summaries[:5]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := tc.r.Route(nil, tc.q, tc.s); !errors.Is(err, format.ErrInvalidArgument) {
				t.Errorf("%s: err %v, want ErrInvalidArgument", tc.name, err)
			}
		})
	}
}

// RouteAt adds Recency times the recency feature to each span's logit;
// without a recency weight it is Route, and Route refuses a router with one.
func TestRouteAt(t *testing.T) {
	r := &Router{Dim: 2, HeadDim: 3, W: []float32{1, 0, 0, 0, 1, 0}, Bias: 0.5}
	summaries := []float32{1, 0, 0, -1, 0.5, 0.5}
	q := []float32{1, 2, 3} // dots 1, -2, 1.5
	ends := []int{10, 50, 99}
	plain, _ := r.Route(nil, q, summaries)
	got, err := r.RouteAt(nil, q, summaries, 99, ends)
	if err != nil || !slices.Equal(got, plain) {
		t.Fatalf("no recency weight: %v, %v, want Route's %v", got, err, plain)
	}
	if got, err := r.RouteAt(nil, q, summaries, 99, nil); err != nil || !slices.Equal(got, plain) {
		t.Fatalf("no recency weight, no ends: %v, %v, want Route's %v", got, err, plain)
	}
	r.Recency = 2
	got, err = r.RouteAt(nil, q, summaries, 99, ends)
	if err != nil {
		t.Fatal(err)
	}
	// ln(100) - ln(100 - end), the distance at least 1.
	feat := []float64{math.Log(100) - math.Log(90), math.Log(100) - math.Log(50), math.Log(100)}
	for s, d := range []float32{1.5, -1.5, 2} {
		want := sigmoid64(float64(d + float32(2*feat[s])))
		if got[s] != want {
			t.Errorf("span %d: %v, want %v", s, got[s], want)
		}
	}
	// A GQA group: each span's best head, the term added once.
	q2 := []float32{1, 2, 3, 0, -3, 0} // second head: dots 0, 3, -1.5
	got, err = r.RouteAt(nil, q2, summaries, 99, ends)
	if err != nil {
		t.Fatal(err)
	}
	for s, d := range []float32{1.5, 3.5, 2} {
		want := sigmoid64(float64(d + float32(2*feat[s])))
		if got[s] != want {
			t.Errorf("group, span %d: %v, want %v", s, got[s], want)
		}
	}
	if f := Recency(99, 0); f != 0 {
		t.Errorf("a span ending at the start: feature %v, want 0", f)
	}
	if f := Recency(10, 20); f != math.Log(11) {
		t.Errorf("a span ending after the query: feature %v, want ln 11", f)
	}
	if _, err := r.Route(nil, q, summaries); !errors.Is(err, format.ErrInvalidArgument) {
		t.Errorf("Route with a recency weight: %v, want ErrInvalidArgument", err)
	}
	if _, err := r.RouteAt(nil, q, summaries, 99, nil); !errors.Is(err, format.ErrInvalidArgument) {
		t.Errorf("a recency weight and no ends: %v, want ErrInvalidArgument", err)
	}
	if _, err := r.RouteAt(nil, q, summaries, 99, ends[:2]); !errors.Is(err, format.ErrInvalidArgument) {
		t.Errorf("two ends for three spans: %v, want ErrInvalidArgument", err)
	}
	if _, err := r.RouteAt(nil, q, summaries, -1, ends); !errors.Is(err, format.ErrInvalidArgument) {
		t.Errorf("negative position: %v, want ErrInvalidArgument", err)
	}
}

func TestSelectThresholdAndOrder(t *testing.T) {
	nan := float32(math.NaN())
	scores := [][]float32{
		{0.9, 0.05, 0.5, nan, 0.7},
		{0.7, 0.06, 0.9, 0.9, 0.01},
	}
	tokens := []int{10, 20, 30, 40, 50}
	z, err := Select(scores, nil, tokens, nil, Budget{})
	if err != nil {
		t.Fatal(err)
	}
	wantOrder := []Zoom{
		{0, 0, 0.9}, {1, 2, 0.9}, {1, 3, 0.9}, // ties: span index, then group
		{1, 0, 0.7}, {0, 4, 0.7},
		{0, 2, 0.5},
		{1, 1, 0.06}, // 0.05 is not above the default tau; NaN never is
	}
	if !reflect.DeepEqual(z.Order, wantOrder) {
		t.Errorf("order\n got %v\nwant %v", z.Order, wantOrder)
	}
	if want := [][]int{{0, 2, 4}, {0, 1, 2, 3}}; !reflect.DeepEqual(z.Spans, want) {
		t.Errorf("spans %v, want %v", z.Spans, want)
	}
	if z.Tokens != 10+30+40+10+50+30+20 || z.Bytes != 0 {
		t.Errorf("used %d tokens %d bytes", z.Tokens, z.Bytes)
	}

	z, _ = Select(scores, []float32{0.6, 0.8}, tokens, nil, Budget{})
	if want := [][]int{{0, 4}, {2, 3}}; !reflect.DeepEqual(z.Spans, want) {
		t.Errorf("per-group tau: spans %v, want %v", z.Spans, want)
	}
	z, _ = Select(scores, []float32{1, 1}, tokens, nil, Budget{})
	if len(z.Order) != 0 || z.Tokens != 0 || !reflect.DeepEqual(z.Spans, [][]int{nil, nil}) {
		t.Errorf("nothing above tau: %+v", z)
	}
}

func TestSelectBudget(t *testing.T) {
	scores := [][]float32{{0.9, 0.8, 0.7, 0.6}}
	tokens := []int{10, 50, 20, 5}
	bytes := [][]int64{{100, 100, 300, 50}}
	tests := []struct {
		name   string
		budget Budget
		spans  []int
		tok    int64
		by     int64
	}{
		{"tokens stop", Budget{Tokens: 40}, []int{0}, 10, 100},
		{"tokens fill", Budget{Tokens: 40, Fill: true}, []int{0, 2, 3}, 35, 450},
		{"tokens exact", Budget{Tokens: 60}, []int{0, 1}, 60, 200},
		{"bytes stop", Budget{Bytes: 400}, []int{0, 1}, 60, 200},
		{"bytes fill", Budget{Bytes: 400, Fill: true}, []int{0, 1, 3}, 65, 250},
		{"both", Budget{Tokens: 80, Bytes: 500, Fill: true}, []int{0, 1, 2}, 80, 500},
		{"both fill", Budget{Tokens: 79, Bytes: 500, Fill: true}, []int{0, 1, 3}, 65, 250},
		{"both exact", Budget{Tokens: 85, Bytes: 550}, []int{0, 1, 2, 3}, 85, 550},
		{"unlimited", Budget{}, []int{0, 1, 2, 3}, 85, 550},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			z, err := Select(scores, nil, tokens, bytes, tc.budget)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(z.Spans[0], tc.spans) || z.Tokens != tc.tok || z.Bytes != tc.by {
				t.Errorf("%s: spans %v, %d tokens, %d bytes; want %v, %d, %d", tc.name, z.Spans[0], z.Tokens, z.Bytes, tc.spans, tc.tok, tc.by)
			}
			if (tc.budget.Tokens > 0 && z.Tokens > tc.budget.Tokens) || (tc.budget.Bytes > 0 && z.Bytes > tc.budget.Bytes) {
				t.Errorf("%s: over budget", tc.name)
			}
		})
	}
}

func TestSelectRejects(t *testing.T) {
	scores := [][]float32{{0.9, 0.8}}
	for _, tc := range []struct {
		name   string
		tau    []float32
		tokens []int
		bytes  [][]int64
		budget Budget
	}{
		{"tau count", []float32{0.1, 0.2}, []int{1, 2}, nil, Budget{}},
		{"span count", nil, []int{1}, nil, Budget{}},
		{"negative tokens", nil, []int{1, -2}, nil, Budget{}},
		{"bytes groups", nil, []int{1, 2}, [][]int64{{1, 2}, {3, 4}}, Budget{}},
		{"bytes spans", nil, []int{1, 2}, [][]int64{{1}}, Budget{}},
		{"negative bytes", nil, []int{1, 2}, [][]int64{{1, -2}}, Budget{}},
		{"bytes budget", nil, []int{1, 2}, nil, Budget{Bytes: 10}},
		{"negative budget", nil, []int{1, 2}, nil, Budget{Tokens: -1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Select(scores, tc.tau, tc.tokens, tc.bytes, tc.budget); !errors.Is(err, format.ErrInvalidArgument) {
				t.Errorf("%s: err %v, want ErrInvalidArgument", tc.name, err)
			}
		})
	}
}
