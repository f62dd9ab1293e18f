package quality

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/lab/llama"
	"github.com/kvstore/kvstore/lab/router"
)

// TestDistillWindows: RouterData's distillation window of a needle is
// the memory span memory decodes with. At the continuation's first step (no decoded
// rows yet) lab/router's hard forward over it, with routers equal to the
// untrained ones, gives the KL of the span method's own decode; the
// resident rows and the zoom fit the budget.
func TestDistillWindows(t *testing.T) {
	m, files := longCtxOrSkip(t, 512)
	filler, err := goBytes(files[0], 512)
	if err != nil {
		t.Fatal(err)
	}
	nd, err := NewNeedle(filler, 512, 1, 0.3, rand.New(rand.NewPCG(3, 4)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cont := nd.Tokens[:nd.Context], nd.Tokens[nd.Context:]
	budgets := []float64{0.1, 0.25}
	lc := LongConfig{Model: m, Budgets: budgets, Only: []string{MethodSpan}}
	set, err := lc.RouterData(ctx, cont, budgets)
	if err != nil {
		t.Fatal(err)
	}
	init, wins := set.Init, set.Windows
	if len(wins) != len(budgets) {
		t.Fatalf("%d windows for %d budgets", len(wins), len(budgets))
	}
	p, err := router.New(m.Layers, m.KVHeads, len(init[0])/m.HeadDim(), m.HeadDim(), init)
	if err != nil {
		t.Fatal(err)
	}
	runs, err := lc.runMethods(ctx, cont, nd.Query)
	if err != nil {
		t.Fatal(err)
	}
	hd := m.HeadDim()
	checked := 0
	for _, r := range runs {
		if r.Method != MethodSpan {
			continue
		}
		i := 0
		if r.Budget == budgets[1] {
			i = 1
		}
		win := wins[i]
		if len(win.Cont) != len(cont) || len(win.Groups) != m.Layers*m.KVHeads || win.Zoom <= 0 {
			t.Fatalf("budget %v: %d tokens, %d groups, zoom %d", r.Budget, len(win.Cont), len(win.Groups), win.Zoom)
		}
		zoomable := 0
		for _, g := range win.Groups {
			if rows := float64(len(g.K)/hd) + float64(win.Zoom)/float64(m.KVHeads); rows > r.Limit {
				t.Errorf("budget %v: %v resident and zoom rows over %v", r.Budget, rows, r.Limit)
			}
			for _, k := range g.SpanK {
				if len(k) > 0 {
					zoomable++
				}
			}
		}
		if zoomable == 0 {
			t.Fatalf("budget %v: no zoomable span", r.Budget)
		}
		g := router.NewGrad(p)
		if err := router.Distill(m, p, wins[i:i+1], []router.StepRef{{Window: 0, Step: 0}}, router.Options{KL: 1}, g); err != nil {
			t.Fatal(err)
		}
		want := llama.KL(win.Teacher[0], llama.Probs(r.Logits[0]))
		t.Logf("budget %v: KL at the first step %.6f, span method's %.6f", r.Budget, g.KL, want)
		if math.Abs(g.KL-want) > 1e-4+1e-3*want {
			t.Errorf("budget %v: distillation KL %v at the first step, the span method's decode %v", r.Budget, g.KL, want)
		}
		checked++
	}
	if checked != 2 {
		t.Fatalf("%d span runs checked", checked)
	}
	if _, err := lc.RouterData(ctx, cont, []float64{0}); !errors.Is(err, format.ErrInvalidArgument) {
		t.Errorf("budget 0: %v", err)
	}
	if _, err := lc.RouterData(ctx, nil, budgets); !errors.Is(err, format.ErrInvalidArgument) {
		t.Errorf("no continuation: %v", err)
	}
}
