package router

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/lab/llama"
)

// tinyModel is a random model with head dim 8 and two query heads per KV
// head.
func tinyModel(t *testing.T, layers int) *llama.Model {
	t.Helper()
	m, err := llama.Random(llama.Config{Dim: 32, Hidden: 48, Layers: layers, Heads: 4, KVHeads: 2, Vocab: 40, SeqLen: 512,
		NormEps: 1e-5, RoPE: format.RoPE{Style: format.RoPEInterleaved, Theta: 10000}}, 13)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// randomWindow draws a window for m and routers for it: per group 6
// resident rows, spans of 1-4 rows (every fourth not zoomable) with keys
// and rows from N(0, 1), a continuation of cont tokens and teacher
// distributions from N(0, 4) logits.
func randomWindow(m *llama.Model, rng *rand.Rand, spans, cont int, zoom int64) (*Params, Window) {
	hd := m.HeadDim()
	groups := m.Layers * m.KVHeads
	vec := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(rng.NormFloat64())
		}
		return v
	}
	w := Window{Pos: 100, Zoom: zoom}
	for range cont {
		w.Cont = append(w.Cont, rng.IntN(m.Vocab))
		w.Teacher = append(w.Teacher, llama.Probs(vec(m.Vocab)))
	}
	for s := range spans {
		w.Ends = append(w.Ends, 10+s*90/spans)
	}
	init := make([][]float32, groups)
	for g := range groups {
		wg := WindowGroup{K: vec(6 * hd), V: vec(6 * hd), ContK: vec(cont * hd), ContV: vec(cont * hd)}
		for s := range spans {
			for range hd {
				wg.Keys = append(wg.Keys, rng.NormFloat64())
			}
			n := 0
			if s%4 != 3 {
				n = 1 + rng.IntN(4)
			}
			wg.SpanK, wg.SpanV = append(wg.SpanK, vec(n*hd)), append(wg.SpanV, vec(n*hd))
		}
		w.Groups = append(w.Groups, wg)
		init[g] = vec(4 * hd)
	}
	p, err := New(m.Layers, m.KVHeads, 4, hd, init)
	if err != nil {
		panic(err)
	}
	for g := range p.Bias {
		p.Bias[g] = rng.NormFloat64()
		p.Tau[g] = 0.3 + 0.4*rng.Float64()
		p.Recency[g] = 0.5 * rng.NormFloat64()
	}
	return p, w
}

// TestDistillGradient checks Distill's gradient against central finite
// differences of its loss with soft gates on a one-layer model, where
// the routers reach the loss only through the gates (a later layer's
// queries would also move with an earlier layer's zoom): through the
// threshold alone, and through the threshold and a budget cut that moves
// with every score.
func TestDistillGradient(t *testing.T) {
	for _, c := range []struct {
		name string
		cut  bool
	}{{"threshold", false}, {"budget cut", true}} {
		t.Run(c.name, func(t *testing.T) {
			m := tinyModel(t, 1)
			rng := rand.New(rand.NewPCG(21, 22))
			p, w := randomWindow(m, rng, 9, 3, 0)
			o := Options{KL: 1, Temp: 0.3, soft: true}
			if c.cut {
				rows := 0
				for _, k := range append(w.Groups[0].SpanK, w.Groups[1].SpanK...) {
					rows += len(k) / m.HeadDim()
				}
				w.Zoom = int64(rows / 2)
				o.softCut, o.CutTemp = true, 0.2
			}
			wins := []Window{w}
			loss := func(p *Params) float64 {
				g := newGrad(p)
				if err := Distill(m, p, wins, Refs(wins), o, g); err != nil {
					t.Fatal(err)
				}
				return g.Loss
			}
			g := newGrad(p)
			if err := Distill(m, p, wins, Refs(wins), o, g); err != nil {
				t.Fatal(err)
			}
			if g.KL <= 0 || g.Loss != g.KL {
				t.Fatalf("loss %v, KL %v", g.Loss, g.KL)
			}
			const h = 1e-5
			check := func(name string, x *float64, got float64) {
				x0 := *x
				*x = x0 + h
				up := loss(p)
				*x = x0 - h
				dn := loss(p)
				*x = x0
				fd := (up - dn) / (2 * h)
				if math.Abs(fd-got) > 1e-6+1e-4*math.Abs(fd) {
					t.Errorf("%s: gradient %.8g, finite difference %.8g", name, got, fd)
				}
			}
			nonzero := 0
			for gi := range p.Groups() {
				check("bias", &p.Bias[gi], g.Bias[gi])
				check("tau", &p.Tau[gi], g.Tau[gi])
				check("recency", &p.Recency[gi], g.Recency[gi])
				for _, i := range rng.Perm(len(p.W[gi]))[:8] {
					check("W", &p.W[gi][i], g.W[gi][i])
					if g.W[gi][i] != 0 {
						nonzero++
					}
				}
			}
			if nonzero < 8 || g.Tau[0] == 0 || g.Bias[1] == 0 || g.Recency[0] == 0 {
				t.Fatalf("gradient mostly zero: %d of 16 W entries, tau %v, bias %v, recency %v", nonzero, g.Tau, g.Bias, g.Recency)
			}
		})
	}
}

// ungated is the logits of w's step i over the resident rows, the
// continuation's rows before it and, with zoomAll, every span's rows,
// no gate.
func ungated(t *testing.T, m *llama.Model, w *Window, i int, zoomAll bool) []float64 {
	t.Helper()
	return zoomedLogits(t, m, w, i, func(int, int) bool { return zoomAll })
}

// zoomedLogits is the logits of w's step i over the resident rows, the
// continuation's rows before it and the rows of the spans s of the groups
// g with zoom(g, s), no gate.
func zoomedLogits(t *testing.T, m *llama.Model, w *Window, i int, zoom func(g, s int) bool) []float64 {
	t.Helper()
	hd := m.HeadDim()
	tape, err := m.GateForward(w.Cont[i], w.Pos+int64(i), func(layer int, _ []float64) ([]llama.GateRows, error) {
		out := make([]llama.GateRows, m.KVHeads)
		for g := range out {
			wg := w.Groups[layer*m.KVHeads+g]
			rs := llama.GateRows{K: append(append([]float32(nil), wg.K...), wg.ContK[:i*hd]...), V: append(append([]float32(nil), wg.V...), wg.ContV[:i*hd]...)}
			for s := range wg.SpanK {
				if zoom(layer*m.KVHeads+g, s) {
					rs.K, rs.V = append(rs.K, wg.SpanK[s]...), append(rs.V, wg.SpanV[s]...)
				}
			}
			rs.Gate = make([]int32, len(rs.K)/hd)
			for j := range rs.Gate {
				rs.Gate[j] = -1
			}
			out[g] = rs
		}
		return out, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return tape.Logits
}

// TestDistillHardDecisions: with tau above every score nothing is zoomed,
// and the loss is the forward pass over the resident and continuation rows
// alone; with tau 0 and room for every span, all are zoomed; the budget is
// shared by a layer's KV heads.
func TestDistillHardDecisions(t *testing.T) {
	m := tinyModel(t, 2)
	rng := rand.New(rand.NewPCG(23, 24))
	p, w := randomWindow(m, rng, 8, 2, 1000)
	want := func(zoomAll bool) float64 {
		var total float64
		for i := range w.Cont {
			l, _ := llama.DistillGrad(ungated(t, m, &w, i, zoomAll), w.Teacher[i])
			total += l / float64(len(w.Cont))
		}
		return total
	}
	run := func(tau float64, zoom int64) *Grad {
		q := p.Clone()
		for g := range q.Tau {
			q.Tau[g] = tau
		}
		w2 := w
		w2.Zoom = zoom
		g := newGrad(q)
		if err := Distill(m, q, []Window{w2}, Refs([]Window{w2}), Options{KL: 2, Temp: 0.01}, g); err != nil {
			t.Fatal(err)
		}
		return g
	}
	none, all := want(false), want(true)
	if math.Abs(none-all) < 1e-3 {
		t.Fatalf("zooming every span changes the KL by %v only", none-all)
	}
	for _, c := range []struct {
		name string
		tau  float64
		zoom int64
		want float64
	}{{"tau 1", 1, 1000, none}, {"no budget", 0, 0, none}, {"tau 0, room for all", 0, 1000, all}} {
		g := run(c.tau, c.zoom)
		if math.Abs(g.KL-c.want) > 1e-9 || math.Abs(g.Loss-2*c.want) > 1e-9 {
			t.Errorf("%s: KL %v loss %v, want %v", c.name, g.KL, g.Loss, c.want)
		}
	}
	// A budget of a few rows lets some spans in, not all.
	if g := run(0, 6); math.Abs(g.KL-none) < 1e-9 || math.Abs(g.KL-all) < 1e-9 {
		t.Errorf("a 6-row budget: KL %v, none %v, all %v", g.KL, none, all)
	}
}

// TestTrainDistill: training on the distillation term alone, towards a
// teacher that saw every span, zooms more and lowers the KL; a run
// stopped and resumed ends where an uninterrupted one does.
func TestTrainDistill(t *testing.T) {
	m := tinyModel(t, 2)
	rng := rand.New(rand.NewPCG(25, 26))
	p, w := randomWindow(m, rng, 10, 4, 1000)
	// The teacher: every span zoomed.
	for i := range w.Cont {
		logits := ungated(t, m, &w, i, true)
		z := make([]float32, len(logits))
		for j, v := range logits {
			z[j] = float32(v)
		}
		w.Teacher[i] = llama.Probs(z)
	}
	wins := []Window{w}
	o := TrainOptions{Loss: Options{KL: 1, Zoom: 1e-9, Temp: 0.2}, Steps: 40, LR: 0.05, Model: m, Windows: wins, KLSteps: 3}
	exs := []Example{{Group: 0, Keys: make([]float64, m.HeadDim()), Tokens: []int{1}, Ends: []int{1}, Steps: []Step{{Queries: make([]float64, m.HeadDim()), Mass: []float64{0}}}}}
	kl := func(p *Params) float64 {
		g := newGrad(p)
		if err := Distill(m, p, wins, Refs(wins), Options{KL: 1, Temp: 0.2}, g); err != nil {
			t.Fatal(err)
		}
		return g.KL
	}
	first := kl(p)
	whole := NewState(p.Clone())
	if err := Train(context.Background(), whole, exs, o); err != nil {
		t.Fatal(err)
	}
	if last := kl(whole.Params); !(last < 0.7*first) {
		t.Fatalf("distillation KL %v -> %v after %d steps", first, last, o.Steps)
	}
	ctx, cancel := context.WithCancel(context.Background())
	half := o
	var saved *State
	half.Checkpoint = func(s *State) error {
		saved = &State{Params: s.Params.Clone(), M: append([]float64(nil), s.M...), V: append([]float64(nil), s.V...), Step: s.Step}
		return nil
	}
	half.Progress = func(s *State, _ *Grad) {
		if s.Step == 15 {
			cancel()
		}
	}
	if err := Train(ctx, NewState(p.Clone()), exs, half); !errors.Is(err, context.Canceled) {
		t.Fatalf("stopped run: %v", err)
	}
	if err := Train(context.Background(), saved, exs, o); err != nil {
		t.Fatal(err)
	}
	a, b := saved.Params.flat(), whole.Params.flat()
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("resumed run differs at parameter %d: %v against %v", i, a[i], b[i])
		}
	}
}

// TestDistillBudgetCut: with tau below every score the budget alone
// decides the zoom, and the gradient reaches W through the budget's cut:
// trained on the distillation term alone towards a teacher that zoomed
// one span the routers rank low, the routers come to zoom it and the KL
// falls to near 0. With room for every span nothing is left to learn and
// the gradient is 0.
func TestDistillBudgetCut(t *testing.T) {
	m := tinyModel(t, 1)
	rng := rand.New(rand.NewPCG(27, 28))
	p, w := randomWindow(m, rng, 8, 1, 0)
	for g := range p.Tau {
		p.Tau[g], p.Bias[g] = -5, 0
		for j := range p.W[g] {
			p.W[g][j] *= 0.3 // moderate scores, alpha away from 0 and 1
		}
	}
	hd := m.HeadDim()
	target := 0 // the span of group 0 with the most rows, which the budget fits alone
	for s, k := range w.Groups[0].SpanK {
		if len(k) > len(w.Groups[0].SpanK[target]) {
			target = s
		}
	}
	w.Zoom = int64(len(w.Groups[0].SpanK[target]) / hd)
	for i := range w.Cont {
		logits := zoomedLogits(t, m, &w, i, func(g, s int) bool { return g == 0 && s == target })
		z := make([]float32, len(logits))
		for j, v := range logits {
			z[j] = float32(v)
		}
		w.Teacher[i] = llama.Probs(z)
	}
	wins := []Window{w}
	const temp = 0.2
	grad := func(p *Params, wins []Window) *Grad {
		g := newGrad(p)
		if err := Distill(m, p, wins, Refs(wins), Options{KL: 1, Temp: temp}, g); err != nil {
			t.Fatal(err)
		}
		return g
	}
	roomy := w
	roomy.Zoom = 1000
	tiny := func(v float64) bool { return math.Abs(v) < 1e-9 }
	if g := grad(p, []Window{roomy}); g.KL <= 0 || !all(g.W[0], tiny) || !tiny(g.Tau[0]) {
		t.Fatalf("room for every span: KL %v, W gradient %v, tau gradient %v, want a KL and no gradient", g.KL, g.W[0][:4], g.Tau[0])
	}
	first := grad(p, wins)
	if first.KL < 0.01 {
		t.Fatalf("the routers zoom the teacher's span already: KL %v", first.KL)
	}
	if all(first.W[0], tiny) {
		t.Fatal("no gradient reaches W through the budget's cut")
	}
	exs := []Example{{Group: 0, Keys: make([]float64, hd), Tokens: []int{1}, Ends: []int{1}, Steps: []Step{{Queries: make([]float64, hd), Mass: []float64{0}}}}}
	st := NewState(p.Clone())
	o := TrainOptions{Loss: Options{KL: 1, Zoom: 1e-9, Temp: temp}, Steps: 40, LR: 0.05, Model: m, Windows: wins}
	if err := Train(context.Background(), st, exs, o); err != nil {
		t.Fatal(err)
	}
	last := grad(st.Params, wins)
	t.Logf("KL %.4f -> %.4f", first.KL, last.KL)
	if !(last.KL < 0.1*first.KL) {
		t.Fatalf("distillation KL %v -> %v: the routers did not learn to zoom the teacher's span", first.KL, last.KL)
	}
}

// all is whether every entry of v meets f.
func all(v []float64, f func(float64) bool) bool {
	return !slices.ContainsFunc(v, func(x float64) bool { return !f(x) })
}

func TestDistillRefuses(t *testing.T) {
	m := tinyModel(t, 2)
	rng := rand.New(rand.NewPCG(27, 28))
	p, w := randomWindow(m, rng, 5, 2, 10)
	bad := []struct {
		name   string
		mutate func(w *Window)
	}{
		{"teacher rows", func(w *Window) { w.Teacher = w.Teacher[:1] }},
		{"teacher entries", func(w *Window) { w.Teacher[0] = w.Teacher[0][:3] }},
		{"groups", func(w *Window) { w.Groups = w.Groups[:3] }},
		{"continuation row", func(w *Window) { w.Groups[1].ContK = w.Groups[1].ContK[1:] }},
		{"span rows", func(w *Window) { w.Groups[2].SpanV[0] = w.Groups[2].SpanV[0][1:] }},
		{"keys", func(w *Window) { w.Groups[0].Keys = w.Groups[0].Keys[1:] }},
		{"negative zoom", func(w *Window) { w.Zoom = -1 }},
		{"NaN teacher", func(w *Window) { w.Teacher[1][4] = math.NaN() }},
		{"short ends", func(w *Window) { w.Ends = w.Ends[1:] }},
		{"no ends, recency", func(w *Window) { w.Ends = nil }},
	}
	for _, c := range bad {
		t.Run(c.name, func(t *testing.T) {
			_, w := randomWindow(m, rand.New(rand.NewPCG(27, 28)), 5, 2, 10)
			c.mutate(&w)
			if err := Distill(m, p, []Window{w}, []StepRef{{0, 0}}, Options{KL: 1}, newGrad(p)); !errors.Is(err, ErrInvalidArgument) {
				t.Errorf("got %v, want ErrInvalidArgument", err)
			}
		})
	}
	if err := Distill(nil, p, []Window{w}, []StepRef{{0, 0}}, Options{KL: 1}, newGrad(p)); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("no model: got %v, want ErrInvalidArgument", err)
	}
	if err := Distill(m, p, []Window{w}, []StepRef{{0, 0}}, Options{KL: 1}, &Grad{}); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("unshaped gradient: got %v, want ErrInvalidArgument", err)
	}
	for _, o := range []Options{{KL: 1, Temp: -1}, {KL: 1, CutTemp: -0.1}, {KL: 1, CutTemp: math.NaN()}, {KL: 1, Temp: math.Inf(1)}} {
		if err := Distill(m, p, []Window{w}, []StepRef{{0, 0}}, o, newGrad(p)); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("temperatures %v, %v: got %v, want ErrInvalidArgument", o.Temp, o.CutTemp, err)
		}
	}
	for _, refs := range [][]StepRef{nil, {{1, 0}}, {{0, 2}}, {{0, -1}}} {
		if err := Distill(m, p, []Window{w}, refs, Options{KL: 1}, newGrad(p)); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("steps %v: got %v, want ErrInvalidArgument", refs, err)
		}
	}
}

func TestSampleRefs(t *testing.T) {
	refs := Refs([]Window{{Cont: make([]int, 5)}, {Cont: make([]int, 7)}})
	if len(refs) != 12 || refs[5] != (StepRef{1, 0}) {
		t.Fatalf("refs %v", refs)
	}
	a, b := SampleRefs(refs, 4, 9), SampleRefs(refs, 4, 9)
	seen := map[StepRef]bool{}
	for i := range a {
		if a[i] != b[i] {
			t.Fatal("the same seed drew differently")
		}
		seen[a[i]] = true
	}
	if len(seen) != 4 {
		t.Fatalf("drew %v: repeats", a)
	}
	if len(SampleRefs(refs, 0, 1)) != 12 || len(SampleRefs(refs, 20, 1)) != 12 {
		t.Fatal("n 0 or past the refs should give them all")
	}
}
