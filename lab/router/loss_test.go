package router

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"
)

// randomProblem draws routers and examples: spans with random keys, some
// unzoomable, steps with random queries and masses summing to at most 1.
func randomProblem(rng *rand.Rand, layers, kvHeads, dim, hd, spans, steps, heads int) (*Params, []Example) {
	w := make([][]float32, layers*kvHeads)
	for g := range w {
		w[g] = make([]float32, dim*hd)
		for i := range w[g] {
			w[g][i] = float32(rng.NormFloat64())
		}
	}
	p, err := New(layers, kvHeads, dim, hd, w)
	if err != nil {
		panic(err)
	}
	for g := range p.Bias {
		p.Bias[g] = rng.NormFloat64() - 2
		p.Tau[g] = 0.05 + 0.2*rng.Float64()
		p.Recency[g] = 0.5 * rng.NormFloat64()
	}
	var exs []Example
	for g := range layers * kvHeads {
		ex := Example{Group: g, Keys: make([]float64, spans*hd), Tokens: make([]int, spans), Ends: make([]int, spans)}
		for i := range ex.Keys {
			ex.Keys[i] = rng.NormFloat64()
		}
		end := 0
		for s := range ex.Ends {
			end += 1 + rng.IntN(40)
			ex.Ends[s] = end
		}
		for s := range ex.Tokens {
			if s%5 != 3 {
				ex.Tokens[s] = 1 + rng.IntN(40)
			}
		}
		for range steps {
			st := Step{Pos: int64(spans*41 + rng.IntN(50)), Queries: make([]float64, heads*hd), Mass: make([]float64, spans)}
			for i := range st.Queries {
				st.Queries[i] = rng.NormFloat64()
			}
			var sum float64
			for s := range st.Mass {
				st.Mass[s] = rng.ExpFloat64()
				sum += st.Mass[s]
			}
			for s := range st.Mass {
				st.Mass[s] /= sum * (1 + rng.Float64())
			}
			ex.Steps = append(ex.Steps, st)
		}
		exs = append(exs, ex)
	}
	return p, exs
}

// TestLossGradient checks every analytic derivative of the loss against
// central finite differences, with and without the budget penalty.
func TestLossGradient(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    Options
	}{
		{"zoom", Options{}},
		{"zoom+budget", Options{Zoom: 0.7, Budget: 3, Share: 0.2, Temp: 0.05}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(3, 4))
			p, exs := randomProblem(rng, 2, 2, 3, 8, 7, 3, 2)
			g, err := Loss(p, exs, tc.o)
			if err != nil {
				t.Fatal(err)
			}
			x, d := p.flat(), g.flat()
			const h = 1e-6
			worst := 0.0
			for i := range x {
				at := func(v float64) float64 {
					y := append([]float64(nil), x...)
					y[i] = v
					q := p.Clone()
					q.unflat(y)
					gq, err := Loss(q, exs, tc.o)
					if err != nil {
						t.Fatal(err)
					}
					return gq.Loss
				}
				fd := (at(x[i]+h) - at(x[i]-h)) / (2 * h)
				diff := math.Abs(fd - d[i])
				if diff > 1e-6+1e-4*math.Abs(fd) {
					t.Errorf("parameter %d: analytic %.8g, finite difference %.8g", i, d[i], fd)
				}
				worst = max(worst, diff)
			}
			if g.Loss <= 0 || math.IsNaN(g.Loss) {
				t.Errorf("loss %v", g.Loss)
			}
			t.Logf("%d parameters, worst |analytic - fd| %.2g", len(x), worst)
		})
	}
}

// TestScoresMatchTraining checks Scores against the loss's own forward:
// with the BCE alone and Mass = alpha, the gradient is zero.
func TestScoresMatchTraining(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	p, exs := randomProblem(rng, 1, 2, 4, 8, 6, 2, 2)
	for i := range exs {
		for j := range exs[i].Steps {
			a := Scores(p, &exs[i], &exs[i].Steps[j])
			for s, v := range a {
				if exs[i].Tokens[s] == 0 {
					if !math.IsNaN(v) {
						t.Fatalf("unzoomable span %d scored %v", s, v)
					}
					a[s] = 0
				}
			}
			exs[i].Steps[j].Mass = a
		}
	}
	g, err := Loss(p, exs, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range g.flat() {
		if math.Abs(v) > 1e-12 {
			t.Fatalf("gradient %d is %v at the BCE's minimum", i, v)
		}
	}
}

func TestLossInvalid(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	p, exs := randomProblem(rng, 1, 1, 2, 4, 3, 1, 2)
	for _, tc := range []struct {
		name string
		mod  func(p *Params, exs []Example) []Example
	}{
		{"no steps", func(p *Params, exs []Example) []Example { return nil }},
		{"bad group", func(p *Params, exs []Example) []Example { exs[0].Group = 5; return exs }},
		{"short keys", func(p *Params, exs []Example) []Example { exs[0].Keys = exs[0].Keys[1:]; return exs }},
		{"bad mass", func(p *Params, exs []Example) []Example { exs[0].Steps[0].Mass = nil; return exs }},
		{"nan tau", func(p *Params, exs []Example) []Example { p.Tau[0] = math.NaN(); return exs }},
		{"nan recency", func(p *Params, exs []Example) []Example { p.Recency[0] = math.NaN(); return exs }},
		{"short ends", func(p *Params, exs []Example) []Example { exs[0].Ends = exs[0].Ends[1:]; return exs }},
		{"no ends, recency", func(p *Params, exs []Example) []Example { exs[0].Ends = nil; return exs }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := p.Clone()
			e := append([]Example(nil), exs...)
			e[0].Steps = append([]Step(nil), exs[0].Steps...)
			if _, err := Loss(q, tc.mod(q, e), Options{}); !errors.Is(err, ErrInvalidArgument) {
				t.Fatalf("err %v, want ErrInvalidArgument", err)
			}
		})
	}
	// Without ends an example is accepted while the recency weight is 0
	// and not trained.
	q := p.Clone()
	q.Recency[0] = 0
	e := append([]Example(nil), exs...)
	e[0].Ends = nil
	if _, err := Loss(q, e, Options{}); err != nil {
		t.Fatalf("no ends, no recency weight: %v", err)
	}
	if _, err := Loss(q, e, Options{Recency: true}); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("no ends, recency trained: %v, want ErrInvalidArgument", err)
	}
	for _, o := range []struct {
		name string
		o    Options
	}{
		{"negative temperature", Options{Temp: -0.1}},
		{"NaN cut temperature", Options{CutTemp: math.NaN()}},
		{"infinite temperature", Options{Temp: math.Inf(1)}},
		{"negative budget weight", Options{Budget: -1}},
		{"NaN zoom weight", Options{Zoom: math.NaN()}},
		{"share above 1", Options{Share: 1.5}},
	} {
		t.Run(o.name, func(t *testing.T) {
			if _, err := Loss(p.Clone(), exs, o.o); !errors.Is(err, ErrInvalidArgument) {
				t.Fatalf("err %v, want ErrInvalidArgument", err)
			}
		})
	}
	if _, err := Loss(p.Clone(), exs, Options{}); err != nil {
		t.Fatalf("default options: %v", err)
	}
}
