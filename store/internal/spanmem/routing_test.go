package spanmem

import (
	"errors"
	"math"
	"testing"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/reconstruct"
	"github.com/kvstore/kvstore/segment"
)

// routingFixture is a memory of 1 layer, 2 KV heads, 3 spans (the middle
// one unfactored), head dim 2 and projection dim 1.
func routingFixture() (*format.SpanMeta, []*segment.Projection, func(l, h int) (*format.HeadMeta, error)) {
	m := &format.SpanMeta{Layers: 1, KVHeads: 2,
		Spans:    []format.Span{{Start: 0, End: 4, Factored: true}, {Start: 4, End: 6}, {Start: 6, End: 12, Factored: true}},
		Resident: []int{0, 4, 5, 6, 11}}
	projs := []*segment.Projection{{Dim: 1, HeadDim: 2, W: []float32{1, 0}}, {Dim: 1, HeadDim: 2, W: []float32{0, 1}}}
	head := func(l, h int) (*format.HeadMeta, error) {
		hm := &format.HeadMeta{Layer: l, Head: h}
		for s := range 3 {
			k := []float32{float32(s + h), float32(2*s - h)}
			hm.Summaries = append(hm.Summaries, format.SpanSummary{Key: k, Proj: []float32{99}})
			hm.K = append(hm.K, format.FactorBlock{Length: uint32(100 * (s + 1))})
			hm.V = append(hm.V, format.FactorBlock{Length: uint32(10 * (s + 1))})
		}
		return hm, nil
	}
	return m, projs, head
}

func TestNewRoutingCostsAndKeys(t *testing.T) {
	m, projs, head := routingFixture()
	rt, err := NewRouting(m, projs, ArtifactRouterWPCA, false, nil, []float32{0.5, -0.5}, nil, head)
	if err != nil {
		t.Fatal(err)
	}
	if rt.Spans != 3 || rt.Dim != 1 || len(rt.Routers) != 2 || rt.Projection != ArtifactRouterWPCA {
		t.Fatalf("routing %+v", rt)
	}
	// Span 0 has rows 0..3, resident 0: 3 to zoom; span 2 rows 6..11,
	// resident 6 and 11: 4; span 1 is unfactored.
	if want := []int{3, 0, 4}; !equalInts(rt.SpanTokens, want) {
		t.Fatalf("span tokens %v, want %v", rt.SpanTokens, want)
	}
	if rt.SpanBytes[1][2] != 330 || rt.SpanBytes[0][0] != 110 {
		t.Fatalf("span bytes %v", rt.SpanBytes)
	}
	// Not the memory's W: keys re-projected, not the stored Proj (99).
	if !equalFloats(rt.Keys[1], []float32{-1, 1, 3}) || !equalFloats(rt.Keys[0], []float32{0, 1, 2}) {
		t.Fatalf("keys %v, want group 0 [0 1 2], group 1 [-1 1 3]", rt.Keys)
	}
	if rt.Tau[0] != reconstruct.DefaultTau || rt.Routers[1].Bias != -0.5 {
		t.Fatalf("tau %v, bias %v", rt.Tau, rt.Routers[1].Bias)
	}
	if want := float32(1 / math.Sqrt(2)); rt.Routers[0].Scale != want {
		t.Fatalf("untrained W scale %v, want %v", rt.Routers[0].Scale, want)
	}
	same, err := NewRouting(m, projs, ArtifactRouterW, true, []float32{0.1, 0.2}, nil, nil, head)
	if err != nil {
		t.Fatal(err)
	}
	if same.Keys[0][2] != 99 || same.Routers[0].Scale != 0 || same.Tau[1] != 0.2 {
		t.Fatalf("trained W as built: keys %v scale %v tau %v", same.Keys, same.Routers[0].Scale, same.Tau)
	}
}

func TestRoutingScoreAndZoom(t *testing.T) {
	m, projs, head := routingFixture()
	rt, err := NewRouting(m, projs, ArtifactRouterW, false, []float32{0, 0}, nil, nil, head)
	if err != nil {
		t.Fatal(err)
	}
	got, err := rt.Score(0, 100, []float32{1, 0}, nil)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := rt.Routers[0].Route(nil, []float32{1, 0}, rt.Keys[0])
	if got[0] != want[0] || got[2] != want[2] || !math.IsNaN(float64(got[1])) {
		t.Fatalf("scores %v, want router's %v with span 1 NaN", got, want)
	}
	if _, err := rt.Score(2, 100, []float32{1, 0}, nil); !errors.Is(err, format.ErrInvalidArgument) {
		t.Fatalf("group 2 of 2: %v", err)
	}
	if _, err := rt.Zoom(100, [][]float32{{1, 0}}, reconstruct.Budget{}); !errors.Is(err, format.ErrInvalidArgument) {
		t.Fatalf("queries for 1 group of 2: %v", err)
	}
	z, err := rt.Zoom(100, [][]float32{{1, 0}, nil}, reconstruct.Budget{})
	if err != nil {
		t.Fatal(err)
	}
	wantZ, err := reconstruct.Select([][]float32{got, {float32(math.NaN()), float32(math.NaN()), float32(math.NaN())}},
		rt.Tau, rt.SpanTokens, rt.SpanBytes, reconstruct.Budget{})
	if err != nil {
		t.Fatal(err)
	}
	if len(z.Spans) != 2 || len(z.Spans[0]) == 0 || len(z.Spans[1]) != 0 || z.Tokens != wantZ.Tokens || z.Bytes != wantZ.Bytes {
		t.Fatalf("zoom %+v, want %+v with group 0 zoomed and group 1 not", z, wantZ)
	}
	for g := range z.Spans {
		if !equalInts(z.Spans[g], wantZ.Spans[g]) {
			t.Fatalf("zoom group %d: %v, want %v", g, z.Spans[g], wantZ.Spans[g])
		}
	}
}

func TestNewRoutingRefusesShapes(t *testing.T) {
	m, projs, head := routingFixture()
	if _, err := NewRouting(m, projs[:1], ArtifactRouterW, false, nil, nil, nil, head); !errors.Is(err, format.ErrInvalidArgument) {
		t.Fatalf("one projection for two groups: %v", err)
	}
	boom := errors.New("boom")
	if _, err := NewRouting(m, projs, ArtifactRouterW, false, nil, nil, nil, func(int, int) (*format.HeadMeta, error) { return nil, boom }); !errors.Is(err, boom) {
		t.Fatalf("head error: %v", err)
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func equalFloats(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
