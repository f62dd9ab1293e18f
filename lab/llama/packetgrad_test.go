package llama

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/internal/testenv"
)

// gradShape is a tiny random model for the gradient checks: grouped-query
// attention (2 query heads per KV head), rotate-half RoPE with llama3
// scaling, an untied classifier.
var gradShape = Config{Dim: 32, Hidden: 48, Layers: 2, Heads: 4, KVHeads: 2, Vocab: 40, SeqLen: 4096,
	NormEps: 1e-5, RoPE: format.RoPE{Style: format.RoPERotateHalf, Theta: 500000, Scaling: format.RoPEScalingLlama3,
		Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OriginalMaxPos: 8192}}

// gradInterleaved is gradShape with llama2.c's interleaved RoPE.
var gradInterleaved = Config{Dim: 32, Hidden: 48, Layers: 2, Heads: 4, KVHeads: 2, Vocab: 40, SeqLen: 4096,
	NormEps: 1e-5, RoPE: format.RoPE{Style: format.RoPEInterleaved, Theta: 10000}}

func gradModel(t testing.TB, cfg Config) *Model {
	t.Helper()
	m, err := Random(cfg, 11)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func storiesModel(t testing.TB) *Model {
	t.Helper()
	m, err := Load(testenv.ModelFile(t, "stories260K.bin"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// randomExample draws documents, a query and teacher distributions
// (softmax of N(0, 4) logits), and adapter rows from N(0, 1).
func randomExample(m *Model, rng *rand.Rand, nh, nt int, docLens []int, query, teach int) (header, trailer []float64, ex *PacketExample) {
	toks := func(n int) []int {
		s := make([]int, n)
		for i := range s {
			s[i] = rng.IntN(m.Vocab)
		}
		return s
	}
	ex = &PacketExample{Prefix: toks(2), Query: toks(query)}
	for _, n := range docLens {
		ex.Docs = append(ex.Docs, toks(n))
	}
	for range teach {
		z := make([]float32, m.Vocab)
		for i := range z {
			z[i] = float32(2 * rng.NormFloat64())
		}
		ex.Teacher = append(ex.Teacher, Probs(z))
	}
	vec := func(n int) []float64 {
		v := make([]float64, n)
		for i := range v {
			v[i] = rng.NormFloat64()
		}
		return v
	}
	return vec(nh * m.Dim), vec(nt * m.Dim), ex
}

// The hand-written gradient of PacketLoss against central finite
// differences along random directions, in float64: |fd - g.u| must be
// under 1e-3 of max(|fd|, |g.u|). The step 1e-4 on N(0, 1) adapter rows
// leaves truncation error (O(h^2)) and rounding (O(1e-16/h)) both far
// below that.
func TestPacketLossGradient(t *testing.T) {
	cases := []struct {
		name string
		m    func(testing.TB) *Model
		docs []int
		hide bool
	}{
		{"rotate-half+llama3", func(t testing.TB) *Model { return gradModel(t, gradShape) }, []int{5, 3, 4}, false},
		{"interleaved", func(t testing.TB) *Model { return gradModel(t, gradInterleaved) }, []int{4, 6}, false},
		{"stories260K", storiesModel, []int{6, 5}, false},
		{"rotate-half+llama3,hidden-header", func(t testing.TB) *Model { return gradModel(t, gradShape) }, []int{5, 3, 4}, true},
		{"stories260K,hidden-header", storiesModel, []int{6, 5}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := tc.m(t)
			rng := rand.New(rand.NewPCG(1, 2))
			header, trailer, ex := randomExample(m, rng, 3, 2, tc.docs, 4, 3)
			ex.HideHeader = tc.hide
			gh, gt := make([]float64, len(header)), make([]float64, len(trailer))
			if _, err := m.PacketLoss(header, trailer, ex, gh, gt); err != nil {
				t.Fatal(err)
			}
			for dir := range 4 {
				uh, ut := make([]float64, len(header)), make([]float64, len(trailer))
				for i := range uh {
					uh[i] = rng.NormFloat64()
				}
				for i := range ut {
					ut[i] = rng.NormFloat64()
				}
				switch dir {
				case 1:
					clear(ut) // the header alone
				case 2:
					clear(uh) // the trailer alone
				}
				an := dot64(gh, uh) + dot64(gt, ut)
				const h = 1e-4
				at := func(s float64) float64 {
					hp, tp := append([]float64(nil), header...), append([]float64(nil), trailer...)
					axpy64(hp, s, uh)
					axpy64(tp, s, ut)
					l, err := m.PacketLoss(hp, tp, ex, nil, nil)
					if err != nil {
						t.Fatal(err)
					}
					return l
				}
				fd := (at(h) - at(-h)) / (2 * h)
				rel := math.Abs(fd-an) / math.Max(math.Abs(fd), math.Abs(an))
				t.Logf("direction %d: analytic %.9g, finite difference %.9g, relative error %.2g", dir, an, fd, rel)
				if !(rel < 1e-3) || an == 0 {
					t.Fatalf("direction %d: analytic %.9g vs finite difference %.9g (relative error %.3g)", dir, an, fd, rel)
				}
			}
		})
	}
}

// PacketLoss's float64 forward pass is the model's: the same example run
// through ForwardEmbeddings (float32), Cache.Shift and Cache.Append gives
// the same loss within float32 rounding.
func TestPacketLossMatchesForward(t *testing.T) {
	for i, cfg := range []Config{gradShape, gradInterleaved, gradShape} {
		m := gradModel(t, cfg)
		rng := rand.New(rand.NewPCG(3, 4))
		header, trailer, ex := randomExample(m, rng, 2, 3, []int{7, 4, 5}, 5, 3)
		ex.HideHeader = i == 2
		want, err := m.PacketLoss(header, trailer, ex, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		rows := func(x []float64) [][]float32 {
			var out [][]float32
			for i := 0; i < len(x); i += m.Dim {
				r := make([]float32, m.Dim)
				for j := range r {
					r[j] = float32(x[i+j])
				}
				out = append(out, r)
			}
			return out
		}
		pre, err := m.Forward(ex.Prefix, 0, nil, ForwardOptions{})
		if err != nil {
			t.Fatal(err)
		}
		all := pre.Cache
		for _, doc := range ex.Docs {
			e, err := m.Embed(doc)
			if err != nil {
				t.Fatal(err)
			}
			x := append(append(rows(header), e...), rows(trailer)...)
			res, err := m.ForwardEmbeddings(x, 0, nil, ForwardOptions{})
			if err != nil {
				t.Fatal(err)
			}
			c := res.Cache
			if ex.HideHeader {
				c = c.Slice(len(header)/m.Dim, c.Len())
			}
			if err := c.Shift(m.RoPE(), int64(all.Len())-c.Positions[0]); err != nil {
				t.Fatal(err)
			}
			if err := all.Append(c); err != nil {
				t.Fatal(err)
			}
		}
		res, err := m.Forward(ex.Query, int64(all.Len()), all, ForwardOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var got float64
		first := len(ex.Query) - len(ex.Teacher)
		for j, p := range ex.Teacher {
			got += KL(p, Probs(res.Logits[first+j])) / float64(len(ex.Teacher))
		}
		if math.Abs(got-want) > 1e-4*math.Max(1, want) {
			t.Fatalf("%v: float32 path loss %.7g, float64 path %.7g", cfg.RoPE.Style, got, want)
		}
	}
}
