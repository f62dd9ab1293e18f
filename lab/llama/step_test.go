package llama

import (
	"errors"
	"math"
	"testing"

	"github.com/kvstore/kvstore/format"
)

// cacheAttend attends, like Forward, over a cache's rows of the step's
// layer followed by the token's own key and value.
func cacheAttend(m *Model, c *Cache) AttendFunc {
	return func(a *StepAttention) error {
		hd, n := m.HeadDim(), c.Len()
		kv := &c.Layers[a.Layer]
		for h := range m.Heads {
			g := h / (m.Heads / m.KVHeads)
			keys := append(append([]float32(nil), kv.K[g*n*hd:(g+1)*n*hd]...), a.K[g*hd:(g+1)*hd]...)
			vals := append(append([]float32(nil), kv.V[g*n*hd:(g+1)*n*hd]...), a.V[g*hd:(g+1)*hd]...)
			Attend(a.Out[h*hd:(h+1)*hd], a.Q[h*hd:(h+1)*hd], keys, vals, nil)
		}
		return nil
	}
}

func TestStepMatchesForward(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"llama31-shape", llama31Shape},
		{"gqa-interleaved", Config{Dim: 48, Hidden: 64, Layers: 3, Heads: 6, KVHeads: 2, Vocab: 50, SeqLen: 64, NormEps: 1e-5,
			RoPE: format.RoPE{Style: format.RoPEInterleaved, Theta: 10000}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := random(t, tc.cfg, 3)
			prompt := []int{1, 7, 3, 9, 2, 11, 5}
			res, err := m.Forward(prompt, 0, nil, ForwardOptions{})
			if err != nil {
				t.Fatal(err)
			}
			c := res.Cache.Clone()
			next := 4
			want, err := m.Forward([]int{next}, int64(len(prompt)), res.Cache, ForwardOptions{LastOnly: true})
			if err != nil {
				t.Fatal(err)
			}
			got, err := m.Step(next, int64(len(prompt)), cacheAttend(m, c))
			if err != nil {
				t.Fatal(err)
			}
			for i, v := range want.Logits[0] {
				if math.Float32bits(v) != math.Float32bits(got[i]) {
					t.Fatalf("logit %d: step %v, forward %v", i, got[i], v)
				}
			}
		})
	}
}

func TestStepPreRoPE(t *testing.T) {
	m := random(t, llama31Shape, 4)
	hd := m.HeadDim()
	err := errors.New("stop")
	_, got := m.Step(3, 17, func(a *StepAttention) error {
		q := append([]float32(nil), a.QPre[:hd]...)
		m.RoPE().Apply(q, a.Pos)
		for j := range q {
			if q[j] != a.Q[j] {
				t.Errorf("query dim %d: RoPE(QPre) %v, Q %v", j, q[j], a.Q[j])
			}
		}
		if a.Pos != 17 || a.Layer != 0 || len(a.Out) != m.Dim || len(a.KPre) != m.KVDim() {
			t.Errorf("step attention: pos %d layer %d, out %d, kpre %d", a.Pos, a.Layer, len(a.Out), len(a.KPre))
		}
		return err
	})
	if !errors.Is(got, err) {
		t.Fatalf("error from attend not returned: %v", got)
	}
	if _, err := m.Step(m.Vocab, 0, nil); !errors.Is(err, format.ErrInvalidArgument) {
		t.Fatalf("token outside vocab: %v", err)
	}
}

func TestAttendBias(t *testing.T) {
	// One row with bias ln 3 weighs as much as three copies of it.
	q := []float32{0.3, -1, 2, 0.5}
	keys := []float32{1, 0, 0, 1, 0.5, 0.5, -1, 2}
	vals := []float32{1, 2, 3, 4, -1, 0, 1, 0}
	got := make([]float32, 4)
	Attend(got, q, keys, vals, []float32{float32(math.Log(3)), 0})
	want := make([]float32, 4)
	Attend(want, q, append(append(append([]float32(nil), keys[:4]...), keys[:4]...), keys...),
		append(append(append([]float32(nil), vals[:4]...), vals[:4]...), vals...), nil)
	for j := range got {
		if math.Abs(float64(got[j]-want[j])) > 1e-6 {
			t.Fatalf("dim %d: biased %v, copies %v", j, got[j], want[j])
		}
	}
}
