package llama

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/kvstore/kvstore/format"
)

// gateFixture is a context of rows per (layer, KV head) from a real
// prefill: the first rows always attended, the others under gates, a few
// rows to a gate.
type gateFixture struct {
	rows [][]GateRows // [layer][KV head]
	pos  int64
}

func newGateFixture(t *testing.T, m *Model, rng *rand.Rand, n, fixed, per int) *gateFixture {
	t.Helper()
	toks := make([]int, n)
	for i := range toks {
		toks[i] = rng.IntN(m.Vocab)
	}
	res, err := m.Forward(toks, 0, nil, ForwardOptions{LastOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	hd := m.HeadDim()
	f := &gateFixture{pos: int64(n), rows: make([][]GateRows, m.Layers)}
	for l, kv := range res.Cache.Layers {
		for g := range m.KVHeads {
			rs := GateRows{K: kv.K[g*n*hd : (g+1)*n*hd], V: kv.V[g*n*hd : (g+1)*n*hd], Gate: make([]int32, n)}
			for r := range n {
				rs.Gate[r] = -1
				if r >= fixed {
					rs.Gate[r] = int32((r - fixed) / per)
				}
			}
			rs.Z = make([]float64, (n-fixed+per-1)/per)
			f.rows[l] = append(f.rows[l], rs)
		}
	}
	return f
}

// setGates sets gate i of every (layer, KV head) to z(i).
func (f *gateFixture) setGates(z func(i int) float64) {
	for _, layer := range f.rows {
		for g := range layer {
			for i := range layer[g].Z {
				layer[g].Z[i] = z(i)
			}
		}
	}
}

func (f *gateFixture) fn(layer int, _ []float64) ([]GateRows, error) { return f.rows[layer], nil }

// With every gate 0 or 1 a gated step is Step over the rows let in, within
// float32 rounding.
func TestGateForwardMatchesStep(t *testing.T) {
	for _, cfg := range []Config{gradShape, gradInterleaved} {
		m := gradModel(t, cfg)
		rng := rand.New(rand.NewPCG(3, 4))
		f := newGateFixture(t, m, rng, 40, 6, 5)
		f.setGates(func(int) float64 { return float64(rng.IntN(2)) })
		tok := rng.IntN(m.Vocab)
		tape, err := m.GateForward(tok, f.pos, f.fn)
		if err != nil {
			t.Fatal(err)
		}
		hd, per := m.HeadDim(), m.Heads/m.KVHeads
		want, err := m.Step(tok, f.pos, func(a *StepAttention) error {
			for g, rs := range f.rows[a.Layer] {
				var k, v []float32
				for r, i := range rs.Gate {
					if i < 0 || rs.Z[i] == 1 {
						k = append(k, rs.K[r*hd:(r+1)*hd]...)
						v = append(v, rs.V[r*hd:(r+1)*hd]...)
					}
				}
				k = append(k, a.K[g*hd:(g+1)*hd]...)
				v = append(v, a.V[g*hd:(g+1)*hd]...)
				for h := g * per; h < (g+1)*per; h++ {
					Attend(a.Out[h*hd:(h+1)*hd], a.Q[h*hd:(h+1)*hd], k, v, nil)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		var worst float64
		for i, v := range want {
			worst = math.Max(worst, math.Abs(float64(v)-tape.Logits[i]))
		}
		if worst > 1e-4 {
			t.Errorf("%v: gated logits differ from Step's by %.3g", cfg.RoPE.Style, worst)
		}
	}
}

// The gates' gradient against central finite differences of the
// distillation loss, at gates inside (0, 1) and at 0 and 1 (one-sided
// there): |fd - g| under 1e-4 of the largest gradient plus 1e-3 of |g|.
func TestGateBackwardGradient(t *testing.T) {
	m := gradModel(t, gradShape)
	rng := rand.New(rand.NewPCG(5, 6))
	f := newGateFixture(t, m, rng, 48, 8, 4)
	f.setGates(func(i int) float64 {
		switch i % 3 {
		case 0:
			return 0
		case 1:
			return 1
		}
		return 0.1 + 0.8*rng.Float64()
	})
	logits := make([]float32, m.Vocab)
	for i := range logits {
		logits[i] = float32(2 * rng.NormFloat64())
	}
	p := Probs(logits)
	tok := rng.IntN(m.Vocab)
	loss := func() float64 {
		tape, err := m.GateForward(tok, f.pos, f.fn)
		if err != nil {
			t.Fatal(err)
		}
		l, _ := DistillGrad(tape.Logits, p)
		return l
	}
	tape, err := m.GateForward(tok, f.pos, f.fn)
	if err != nil {
		t.Fatal(err)
	}
	_, dl := DistillGrad(tape.Logits, p)
	dz := tape.Backward(dl)
	var big float64
	for _, layer := range dz {
		for _, g := range layer {
			for _, v := range g {
				big = math.Max(big, math.Abs(v))
			}
		}
	}
	if big == 0 {
		t.Fatal("every gate's gradient is 0")
	}
	const h = 1e-5
	checked := 0
	for l, layer := range f.rows {
		for g := range layer {
			z := layer[g].Z
			for i := range z {
				z0 := z[i]
				var fd float64
				switch {
				case z0 == 0:
					z[i] = h
					up := loss()
					z[i] = 2 * h
					up2 := loss()
					z[i] = 0
					fd = (4*up - up2 - 3*loss()) / (2 * h)
				case z0 == 1:
					z[i] = 1 - h
					dn := loss()
					z[i] = 1 - 2*h
					dn2 := loss()
					z[i] = 1
					fd = (3*loss() - 4*dn + dn2) / (2 * h)
				default:
					z[i] = z0 + h
					up := loss()
					z[i] = z0 - h
					fd = (up - loss()) / (2 * h)
				}
				z[i] = z0
				if d := math.Abs(fd - dz[l][g][i]); d > 1e-4*big+1e-3*math.Abs(dz[l][g][i]) {
					t.Errorf("layer %d head %d gate %d (z %.2f): gradient %.6g, finite difference %.6g", l, g, i, z0, dz[l][g][i], fd)
				}
				checked++
			}
		}
	}
	if checked < 20 {
		t.Fatalf("only %d gates checked", checked)
	}
}

func TestGateForwardRefuses(t *testing.T) {
	m := gradModel(t, gradShape)
	bad := []struct {
		name   string
		mutate func(f *gateFixture)
	}{
		{"gate above 1", func(f *gateFixture) { f.rows[1][0].Z[0] = 1.5 }},
		{"NaN gate", func(f *gateFixture) { f.rows[0][0].Z[1] = math.NaN() }},
		{"gate index past Z", func(f *gateFixture) { f.rows[0][1].Gate[5] = int32(len(f.rows[0][1].Z)) }},
		{"short values", func(f *gateFixture) { f.rows[0][0].V = f.rows[0][0].V[:len(f.rows[0][0].V)-1] }},
		{"missing KV head", func(f *gateFixture) { f.rows[1] = f.rows[1][:1] }},
		{"a gate per row too", func(f *gateFixture) { f.rows[0][0].Gate = f.rows[0][0].Gate[1:] }},
	}
	for _, c := range bad {
		t.Run(c.name, func(t *testing.T) {
			f := newGateFixture(t, m, rand.New(rand.NewPCG(7, 8)), 16, 4, 4)
			c.mutate(f)
			if _, err := m.GateForward(3, f.pos, f.fn); !errors.Is(err, format.ErrInvalidArgument) {
				t.Errorf("got %v, want ErrInvalidArgument", err)
			}
		})
	}
	if _, err := m.GateForward(m.Vocab, 16, func(int, []float64) ([]GateRows, error) { return nil, nil }); !errors.Is(err, format.ErrInvalidArgument) {
		t.Errorf("token outside the vocab: got %v", err)
	}
	boom := errors.New("boom")
	if _, err := m.GateForward(1, 16, func(int, []float64) ([]GateRows, error) { return nil, boom }); !errors.Is(err, boom) {
		t.Errorf("rows' error: got %v", err)
	}
}
