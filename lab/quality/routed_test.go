package quality

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/lab/router"
	"github.com/kvstore/kvstore/segment"
	"github.com/kvstore/kvstore/store"
)

// TestRouterExamples builds RouterData's router examples of a short
// needle: one per (layer, KV head), a step per decoded token, each step's teacher mass a
// share of attention (in [0, 1], summing over the spans to at most 1: the
// decoded rows hold the rest).
// Routers trained briefly on them and stored as artifacts then route
// span+trained, and span+oracle zooms by the teacher: every routed method
// keeps within its budget.
func TestRouterExamples(t *testing.T) {
	m, files := longCtxOrSkip(t, 512)
	filler, err := goBytes(files[0], 512)
	if err != nil {
		t.Fatal(err)
	}
	nd, err := NewNeedle(filler, 512, 1, 0.2, rand.New(rand.NewPCG(1, 2)))
	if err != nil {
		t.Fatal(err)
	}
	lc := LongConfig{Model: m, Budgets: []float64{0.25}}
	set, err := lc.RouterData(nd.Tokens[:nd.Context], nd.Tokens[nd.Context:], nil)
	if err != nil {
		t.Fatal(err)
	}
	exs, init := set.Examples, set.Init
	if set.Windows != nil {
		t.Fatalf("%d distillation windows for no budget", len(set.Windows))
	}
	if len(exs) != m.Layers*m.KVHeads || len(init) != len(exs) {
		t.Fatalf("%d examples, %d projections for %d groups", len(exs), len(init), m.Layers*m.KVHeads)
	}
	cont := len(nd.Tokens) - nd.Context
	for g, ex := range exs {
		if len(ex.Steps) != cont {
			t.Fatalf("group %d: %d steps for %d tokens", g, len(ex.Steps), cont)
		}
		for _, st := range ex.Steps {
			var sum float64
			for _, v := range st.Mass {
				if !(v >= 0 && v <= 1) {
					t.Fatalf("group %d: mass %v", g, v)
				}
				sum += v
			}
			if sum > 1+1e-9 || sum <= 0 {
				t.Fatalf("group %d: masses sum to %v", g, sum)
			}
		}
	}
	dim := len(init[0]) / m.HeadDim()
	p, err := router.New(m.Layers, m.KVHeads, dim, m.HeadDim(), init)
	if err != nil {
		t.Fatal(err)
	}
	st := router.NewState(p)
	if err := router.Train(t.Context(), st, exs, router.TrainOptions{Steps: 5, Loss: router.Options{Budget: 1, Share: 0.1}}); err != nil {
		t.Fatal(err)
	}
	if lc.Routers, err = st.Params.Artifacts(); err != nil {
		t.Fatal(err)
	}
	lc.Oracle = true
	runs, err := lc.runMethods(nd.Tokens[:nd.Context], nd.Tokens[nd.Context:], nd.Query)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, r := range runs {
		seen[r.Method] = true
		if r.Rows > r.Limit && r.Method != MethodSpanSum && r.Method != MethodSpanTrainedSum {
			t.Errorf("%s: %v rows over the budget's %v", r.Method, r.Rows, r.Limit)
		}
		s := scoreNeedle(nd, r.Logits)
		t.Logf("%-16s top-1 %.2f log-prob %.2f rows %v/%v", r.Method, s.Top1, s.LogProb, r.Rows, r.Limit)
		if math.IsNaN(s.LogProb) {
			t.Errorf("%s: NaN log-prob", r.Method)
		}
	}
	for _, name := range []string{MethodSpanTrained, MethodSpanTrainedSum, MethodSpanTrainedWindow, MethodSpanOracle} {
		if !seen[name] {
			t.Errorf("no %s run", name)
		}
	}
}

// TestRouterRecencyDecode stores SeKV's untrained routers with and without
// a recency weight and decodes the end of a plain Go window through
// span+trained: the weight reaches the decode loop (other logits), and a
// large one, which zooms the spans nearest the query, brings the text
// closer to full KV than the position-blind routers at 10%.
func TestRouterRecencyDecode(t *testing.T) {
	m, files := longCtxOrSkip(t, 512)
	b, err := goBytes(files[1], 511)
	if err != nil {
		t.Fatal(err)
	}
	toks := appendBytes([]int{GoBOS}, b)
	n := len(toks) - 64
	lc := LongConfig{Model: m, Budgets: []float64{0.10}}
	set, err := lc.RouterData(toks[:n], toks[n:], nil)
	if err != nil {
		t.Fatal(err)
	}
	dim := len(set.Init[0]) / m.HeadDim()
	var kl []float64
	var logits [][][]float32
	for _, rho := range []float64{0, 3} {
		p, err := router.New(m.Layers, m.KVHeads, dim, m.HeadDim(), set.Init)
		if err != nil {
			t.Fatal(err)
		}
		for g := range p.Recency {
			p.Recency[g] = rho
		}
		if lc.Routers, err = p.Artifacts(); err != nil {
			t.Fatal(err)
		}
		lc.Only = []string{MethodSpanTrained}
		runs, err := lc.runMethods(toks[:n], toks[n:], 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(runs) != 2 || runs[1].Method != MethodSpanTrained {
			t.Fatalf("runs %d, want full and %s", len(runs), MethodSpanTrained)
		}
		s := score(runs[0].Logits, runs[1].Logits)
		t.Logf("rho %v: KL %.4f top-1 %.3f rows %v/%v", rho, s.KL, s.Top1, runs[1].Rows, runs[1].Limit)
		kl, logits = append(kl, s.KL), append(logits, runs[1].Logits)
	}
	same := true
	for i := range logits[0] {
		same = same && slices.Equal(logits[0][i], logits[1][i])
	}
	if same {
		t.Fatal("a recency weight of 3 decodes the same logits as none")
	}
	if !(kl[1] < kl[0]) {
		t.Fatalf("KL %.4f with recency 3, %.4f without: the recent spans did not help", kl[1], kl[0])
	}
}

// TestTrainedRoutingRowDType: routers stored for the model route its
// memories whatever dtype their rows are stored in. A bf16 memory
// (Config.RowDType) has its own spec; trainedRouting stores the artifacts
// under it, so the routing is the trained one (its W, recency weight and
// tau), never the memory's PCA projection.
func TestTrainedRoutingRowDType(t *testing.T) {
	m, res, h := tinyPrefill(t, 160)
	hd, groups, dim := m.HeadDim(), m.Layers*m.KVHeads, 4
	init := make([][]float32, groups)
	for g := range init {
		init[g] = make([]float32, dim*hd)
		for j := range init[g] {
			init[g][j] = float32((g*31+j*7)%13) - 6
		}
	}
	p, err := router.New(m.Layers, m.KVHeads, dim, hd, init)
	if err != nil {
		t.Fatal(err)
	}
	for g := range p.Recency {
		p.Recency[g], p.Tau[g] = 0.5+float64(g), 0.25
	}
	arts, err := p.Artifacts()
	if err != nil {
		t.Fatal(err)
	}
	for _, dt := range []format.DType{format.DTypeF32, format.DTypeBF16} {
		cfg := Config{Model: m, Context: 2 * sinks, Continuation: 1, Name: "trained", RowDType: dt,
			Segment: segment.Options{MinSpan: 16, MaxSpan: 40}}
		cfg.ensureDefaults()
		s, err := newSpanStore(m, res.Cache, h, &cfg)
		if err != nil {
			t.Fatalf("%v: %v", dt, err)
		}
		rt, err := s.trainedRouting(m, &cfg, arts)
		s.close()
		if err != nil {
			t.Fatalf("%v: %v", dt, err)
		}
		if rt.Projection != store.ArtifactRouterW || len(rt.Routers) != groups || rt.Dim != dim {
			t.Fatalf("%v: routing from %q, %d routers of dim %d", dt, rt.Projection, len(rt.Routers), rt.Dim)
		}
		for g, r := range rt.Routers {
			if r.Recency != float32(p.Recency[g]) || rt.Tau[g] != 0.25 {
				t.Errorf("%v: group %d: recency %v tau %v, trained %v and 0.25", dt, g, r.Recency, rt.Tau[g], p.Recency[g])
			}
		}
	}
}
