package quality

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"gonum.org/v1/gonum/floats"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/lab/router"
)

// randomSamples are n samples of f features (the first 1) and soft
// targets sigmoid(w . x) for the given w.
func randomSamples(rng *rand.Rand, w []float64, n int) (x, y []float64) {
	f := len(w)
	x, y = make([]float64, n*f), make([]float64, n)
	for i := range n {
		xi := x[i*f : (i+1)*f]
		xi[0] = 1
		for j := 1; j < f; j++ {
			xi[j] = rng.NormFloat64()
		}
		y[i] = router.Sigmoid(floats.Dot(w, xi))
	}
	return x, y
}

func TestBCELossGradient(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const f = rankFeatures
	x, _ := randomSamples(rng, make([]float64, f), 40)
	y := make([]float64, 40)
	for i := range y {
		y[i] = rng.Float64() * 0.2 // masses: small, soft
	}
	w := make([]float64, f)
	for j := range w {
		w[j] = rng.NormFloat64()
	}
	const l2, eps = 0.01, 1e-6
	_, g, h := bceLoss(w, x, y, f, l2, true)
	for j := range f {
		up, down := slices.Clone(w), slices.Clone(w)
		up[j] += eps
		down[j] -= eps
		lu, gu, _ := bceLoss(up, x, y, f, l2, true)
		ld, gd, _ := bceLoss(down, x, y, f, l2, true)
		if num := (lu - ld) / (2 * eps); math.Abs(num-g[j]) > 1e-6*max(1, math.Abs(num)) {
			t.Errorf("gradient %d: %.9f, finite differences %.9f", j, g[j], num)
		}
		for k := range f {
			if num := (gu[k] - gd[k]) / (2 * eps); math.Abs(num-h[k*f+j]) > 1e-5*max(1, math.Abs(num)) {
				t.Errorf("Hessian (%d, %d): %.9f, finite differences %.9f", k, j, h[k*f+j], num)
			}
		}
	}
}

func TestNewtonBCE(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	want := []float64{-3, 0.8, -1.5, -0.4, 0.1, 0.6, 0.2, 0.3, 0.25}
	x, y := randomSamples(rng, want, 2000)
	w, loss, err := newtonBCE(x, y, len(want), 0)
	if err != nil {
		t.Fatal(err)
	}
	for j := range want {
		if math.Abs(w[j]-want[j]) > 1e-4 {
			t.Errorf("weight %d: %.6f, want %.6f (the targets' own)", j, w[j], want[j])
		}
	}
	// At the targets' own weights the loss is the targets' entropy, its minimum.
	if l, _, _ := bceLoss(want, x, y, len(want), 0, false); loss > l+1e-9 {
		t.Errorf("loss %.9f above the generating weights' %.9f", loss, l)
	}
	// A constant feature (l2 keeps the Hessian definite) leaves a fit.
	for i := range y {
		x[i*len(want)+2] = 0
	}
	if _, _, err := newtonBCE(x, y, len(want), rankL2); err != nil {
		t.Errorf("a feature always 0: %v", err)
	}
	if _, err := solve([]float64{1, 2, 2, 1}, []float64{1, 1}, 2); !errors.Is(err, format.ErrInvalidArgument) {
		t.Errorf("an indefinite matrix: %v, want ErrInvalidArgument", err)
	}
}

func TestSpanFeatures(t *testing.T) {
	f := make([]float64, rankFeatures)
	spanFeatures(f, 0.25, 0.5, 0.125, -3, 99, 8)
	want := []float64{1, math.Log(0.25), 0, math.Log(100), math.Log(100) * math.Log(100), math.Log(8), math.Log(0.5), math.Log(0.125), -3}
	for j := range want {
		if math.Abs(f[j]-want[j]) > 1e-12 {
			t.Errorf("feature %d: %v, want %v", j, f[j], want[j])
		}
	}
	// No anchor near: the floor and the flag; no mean key: -50; a span after the query (never
	// in a stored memory) counts as distance 0.
	spanFeatures(f, float32(math.NaN()), 0, 0, math.Inf(-1), -5, 0)
	want = []float64{1, math.Log(rankFloor), 1, 0, 0, 0, math.Log(rankFloor), math.Log(rankFloor), -50}
	for j := range want {
		if math.Abs(f[j]-want[j]) > 1e-12 {
			t.Errorf("no anchor, feature %d: %v, want %v", j, f[j], want[j])
		}
	}
}

// TestFitRank fits the ranker on a 512-byte needle and window of held-out
// files, as longctxquality's -fit-rank does on training text.
func TestFitRank(t *testing.T) {
	m, files := longCtxOrSkip(t, 512)
	retrieval := make([]bool, m.Layers*m.KVHeads)
	retrieval[1*m.KVHeads+1], retrieval[2*m.KVHeads+1] = true, true
	cfg := Config{AnchorShare: 0.85}
	cfg.Segment.AnchorAlpha = 0.5
	lc := LongConfig{Model: m, Budgets: []float64{0.25}, Retrieval: retrieval, Span: cfg, ZoomTau: 0.02, ZoomGate: 0.3}
	fit, err := FitRank(&NeedleConfig{LongConfig: lc, Files: files, Window: 512, Needles: 1, Keys: 1, Seed: 1},
		&LongTextConfig{LongConfig: lc, Files: files[1:2], Window: 512, Tail: 32})
	if err != nil {
		t.Fatal(err)
	}
	for gi, w := range fit.W {
		t.Logf("group %d: %d samples, BCE %.4f (constant %.4f), weights %.3f", gi, fit.Samples[gi], fit.Loss[gi], fit.Base[gi], w)
		if (w != nil) != retrieval[gi] {
			t.Fatalf("group %d (retrieval %v): weights %v", gi, retrieval[gi], w)
		}
		if w == nil {
			continue
		}
		if fit.Samples[gi] == 0 || !(fit.Loss[gi] <= fit.Base[gi]) || !(fit.Floor[gi] <= fit.Loss[gi]) {
			t.Errorf("group %d: %d samples, BCE %v, the best constant's %v, the targets' entropy %v", gi, fit.Samples[gi], fit.Loss[gi], fit.Base[gi], fit.Floor[gi])
		}
	}
	lc.RankFit = fit
	rows, _, err := RunNeedles(NeedleConfig{LongConfig: lc, Files: files, Window: 512, Needles: 1, Keys: 1, Seed: 2})
	if err != nil {
		t.Fatal(err)
	}
	var seen bool
	for _, r := range rows {
		if r.Method == MethodSpanHeadsFit {
			seen = true
			if r.OverBudget || r.Rows > r.Budget || math.IsNaN(r.LogProb) {
				t.Errorf("%s: %.3f of the context at %v, log-prob %v", r.Method, r.Rows, r.Budget, r.LogProb)
			}
		}
	}
	if !seen {
		t.Errorf("RankFit set: no %s row", MethodSpanHeadsFit)
	}
	if _, err := FitRank(nil, nil); !errors.Is(err, format.ErrInvalidArgument) {
		t.Errorf("no text: %v, want ErrInvalidArgument", err)
	}
	lc.Retrieval = nil
	if _, err := FitRank(&NeedleConfig{LongConfig: lc, Files: files, Window: 512, Needles: 1, Keys: 1}, nil); !errors.Is(err, format.ErrInvalidArgument) {
		t.Errorf("no retrieval heads: %v, want ErrInvalidArgument", err)
	}
}

func TestSpanEstimates(t *testing.T) {
	e := newSpanEstimates(1, 3)
	e.reset(0)
	// Two query heads of one KV head, each 1/3 on resident row 0 and 2/3
	// on row 1; row 0 lies in span 0, row 1 in span 0 and right before
	// span 1; span 2 has a mean key, the others none.
	near := [][2]int{{0, -1}, {0, 1}}
	meanKeys := [][]float32{nil, nil, {1, 0}}
	for _, q := range [][]float32{{0, 0}, {2, 0}} {
		logits := []float64{0, math.Log(2)} // softmax 1/3, 2/3
		e.add(0, 2, logits, math.Log(2), 1.5, near, q, meanKeys, 1)
	}
	lse := math.Log(3)
	want := [][]float64{{1, 2.0 / 3, 0}, {math.Inf(-1), math.Inf(-1), 2 - lse}}
	for sp := range 3 {
		if math.Abs(e.mass[0][sp]-want[0][sp]) > 1e-12 || e.mean[0][sp] != want[1][sp] && math.Abs(e.mean[0][sp]-want[1][sp]) > 1e-12 {
			t.Errorf("span %d: mass %v, mean %v; want %v, %v", sp, e.mass[0][sp], e.mean[0][sp], want[0][sp], want[1][sp])
		}
	}
	e.reset(0)
	if e.mass[0][0] != 0 || !math.IsInf(e.mean[0][2], -1) {
		t.Errorf("after reset: mass %v, mean %v", e.mass[0], e.mean[0])
	}
}
