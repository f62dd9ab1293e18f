package store

import (
	"errors"
	"math"
	"testing"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/reconstruct"
	"github.com/kvstore/kvstore/segment"
	"github.com/kvstore/kvstore/store/internal/spanmem"
)

// openRouting stores a memory of the fixture and returns its reader.
func openRouting(t *testing.T, db *DB) (*SpanReader, *SpanMemory) {
	t.Helper()
	_, in := spanFixture(t, 96, 0, format.DTypeF32)
	m := buildSpans(t, db, in, SpanOptions{ProjectionDim: 8})
	r := putOpenSpan(t, db, m, "ctx")
	t.Cleanup(r.Release)
	return r, m
}

func testQueries(groups, n, hd int, seed float32) [][]float32 {
	q := make([][]float32, groups)
	for g := range q {
		q[g] = make([]float32, n*hd)
		for i := range q[g] {
			q[g][i] = float32(math.Sin(float64(seed) + float64(g*31+i)))
		}
	}
	return q
}

func TestSpanRoutingScores(t *testing.T) {
	db, _, _ := openSpanDB(t, false)
	defer db.Close()
	r, m := openRouting(t, db)
	rt, err := r.Routing()
	if err != nil {
		t.Fatal(err)
	}
	if rt.Projection != ArtifactRouterWPCA || rt.Dim != 8 || len(rt.Routers) != 4 {
		t.Fatalf("routing of %q, dim %d, %d groups", rt.Projection, rt.Dim, len(rt.Routers))
	}
	q := testQueries(4, 2, 16, 1)
	for g := range 4 {
		scores, err := rt.Score(g, 96, q[g], nil)
		if err != nil {
			t.Fatal(err)
		}
		p := segment.Projection{Dim: 8, HeadDim: 16, W: rt.Routers[g].W}
		for s, sp := range m.Segmentation.Spans {
			a := scores[s]
			if !sp.Factored {
				if !math.IsNaN(float64(a)) {
					t.Fatalf("group %d: unfactored span %d scored %v, want NaN", g, s, a)
				}
				continue
			}
			// The largest over the query heads of sigmoid(W q . W k / sqrt(d)).
			best := math.Inf(-1)
			for h := range 2 {
				pq := p.Project(nil, q[g][h*16:(h+1)*16])
				var dot float64
				for j, v := range m.Heads[g].Summaries[s].Proj {
					dot += float64(pq[j]) * float64(v)
				}
				best = math.Max(best, 1/(1+math.Exp(-dot/4)))
			}
			if math.Abs(float64(a)-best) > 1e-5 {
				t.Fatalf("group %d span %d: score %v, want %v", g, s, a, best)
			}
		}
	}
}

func TestSpanRoutingZoomBudget(t *testing.T) {
	db, _, _ := openSpanDB(t, false)
	defer db.Close()
	r, m := openRouting(t, db)
	rt, err := r.Routing()
	if err != nil {
		t.Fatal(err)
	}
	for s, sp := range m.Segmentation.Spans {
		anchors := 0
		for _, a := range m.Resident {
			if a >= sp.Start && a < sp.End {
				anchors++
			}
		}
		if want := sp.Len() - anchors; sp.Factored && rt.SpanTokens[s] != want {
			t.Fatalf("span %d: %d tokens to zoom, want %d", s, rt.SpanTokens[s], want)
		}
	}
	q := testQueries(4, 2, 16, 2)
	for _, budget := range []reconstruct.Budget{{Tokens: 30}, {Tokens: 30, Fill: true}, {Bytes: 4000, Fill: true}, {Tokens: 1}} {
		z, err := rt.Zoom(96, q, budget)
		if err != nil {
			t.Fatal(err)
		}
		if (budget.Tokens > 0 && z.Tokens > budget.Tokens) || (budget.Bytes > 0 && z.Bytes > budget.Bytes) {
			t.Fatalf("budget %+v: used %d tokens, %d bytes", budget, z.Tokens, z.Bytes)
		}
		for i, zz := range z.Order {
			if !m.Segmentation.Spans[zz.Span].Factored {
				t.Fatalf("zoomed unfactored span %d", zz.Span)
			}
			if i > 0 && zz.Score > z.Order[i-1].Score {
				t.Fatalf("zoom order not by descending score")
			}
		}
		if budget.Tokens == 30 && len(z.Order) == 0 {
			t.Fatalf("budget %+v: nothing zoomed", budget)
		}
	}
	// Only layer 1's queries known: only its groups zoom.
	half := [][]float32{nil, nil, q[2], q[3]}
	z, err := rt.Zoom(96, half, reconstruct.Budget{})
	if err != nil {
		t.Fatal(err)
	}
	if len(z.Spans[0]) != 0 || len(z.Spans[1]) != 0 || len(z.Spans[2])+len(z.Spans[3]) == 0 {
		t.Fatalf("zoom of layer 1 only: %v", z.Spans)
	}
	if _, err := rt.Zoom(96, q[:2], reconstruct.Budget{}); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("queries for 2 of 4 groups: %v", err)
	}
}

func TestSpanRoutingArtifacts(t *testing.T) {
	db, _, _ := openSpanDB(t, false)
	defer db.Close()
	r, m := openRouting(t, db)
	fp := m.Model.Fingerprint()
	// tau = 1 zooms nothing (alpha < 1); a large bias with tau 0.5 everything.
	put := func(name string, v float32) {
		t.Helper()
		d, meta, err := EncodeHeadValues([]float32{v, v, v, v}, 2, 2)
		if err != nil {
			t.Fatal(err)
		}
		if err := db.PutArtifact(fp, name, d, meta); err != nil {
			t.Fatal(err)
		}
	}
	put(ArtifactTau, 1)
	rt, err := r.Routing()
	if err != nil {
		t.Fatal(err)
	}
	if z, err := rt.Zoom(96, testQueries(4, 2, 16, 3), reconstruct.Budget{}); err != nil || len(z.Order) != 0 {
		t.Fatalf("tau 1 zoomed %v (%v)", z, err)
	}
	put(ArtifactTau, 0.5)
	put(ArtifactRouterBias, 50)
	if rt, err = r.Routing(); err != nil {
		t.Fatal(err)
	}
	z, err := rt.Zoom(96, testQueries(4, 2, 16, 3), reconstruct.Budget{})
	if err != nil {
		t.Fatal(err)
	}
	factored := 0
	for _, s := range m.Segmentation.Spans {
		if s.Factored {
			factored++
		}
	}
	if len(z.Order) != 4*factored {
		t.Fatalf("bias 50 zoomed %d of %d spans", len(z.Order), 4*factored)
	}
	// A stored recency weight reaches every router; the scores are
	// RouteAt's at the position given, over the spans' ends.
	put(ArtifactTau, 0.05)
	put(ArtifactRouterBias, -2)
	put(ArtifactRouterRecency, 3)
	if rt, err = r.Routing(); err != nil {
		t.Fatal(err)
	}
	for s, sp := range m.Segmentation.Spans {
		if rt.Ends[s] != int(sp.End) {
			t.Fatalf("span %d: end %d, want %d", s, rt.Ends[s], sp.End)
		}
	}
	q := testQueries(4, 2, 16, 3)
	for g := range 4 {
		if rt.Routers[g].Recency != 3 {
			t.Fatalf("group %d: recency %v, want 3", g, rt.Routers[g].Recency)
		}
		got, err := rt.Score(g, 96, q[g], nil)
		if err != nil {
			t.Fatal(err)
		}
		plain := rt.Routers[g]
		plain.Recency = 0
		base, _ := plain.Route(nil, q[g], rt.Keys[g])
		for s, sp := range m.Segmentation.Spans {
			if !sp.Factored {
				continue
			}
			x := math.Log(float64(base[s])) - math.Log1p(-float64(base[s]))
			want := 1 / (1 + math.Exp(-(x + 3*reconstruct.Recency(96, int(sp.End)))))
			if math.Abs(float64(got[s])-want) > 1e-5 {
				t.Fatalf("group %d span %d: score %v, want %v", g, s, got[s], want)
			}
		}
	}
	if _, err := rt.Routers[0].Route(nil, q[0], rt.Keys[0]); !errors.Is(err, format.ErrInvalidArgument) {
		t.Fatalf("position-blind Route with a recency weight: %v", err)
	}
	if err := db.DeleteArtifact(fp, ArtifactRouterRecency); err != nil {
		t.Fatal(err)
	}
	// A trained W stored after the memory was built takes over, and the
	// summary keys are re-projected with it.
	ps := make([]*segment.Projection, 4)
	for g := range ps {
		ps[g] = &segment.Projection{Dim: 3, HeadDim: 16, W: make([]float32, 48)}
		for i := range 3 {
			ps[g].W[i*16+i+g] = 1
		}
	}
	d, meta, err := spanmem.EncodeProjections(ps, 2, 2)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.PutArtifact(fp, ArtifactRouterW, d, meta); err != nil {
		t.Fatal(err)
	}
	if rt, err = r.Routing(); err != nil {
		t.Fatal(err)
	}
	if rt.Projection != ArtifactRouterW || rt.Dim != 3 || rt.Routers[1].Scale != 0 {
		t.Fatalf("trained W not used: %q dim %d scale %v", rt.Projection, rt.Dim, rt.Routers[1].Scale)
	}
	key := m.Heads[1].Summaries[2].Key
	if got := rt.Keys[1][6:9]; got[0] != key[1] || got[1] != key[2] || got[2] != key[3] {
		t.Fatalf("re-projected key %v, want %v", got, key[1:4])
	}
	// Without any W the memory cannot route.
	for _, name := range []string{ArtifactRouterW, ArtifactRouterWPCA} {
		if err := db.DeleteArtifact(fp, name); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := r.Routing(); !errors.Is(err, ErrNotFound) {
		t.Fatalf("routing without W: %v", err)
	}
}
