package store

import (
	"context"
	"math"
	"testing"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/internal/testenv"
	"github.com/kvstore/kvstore/lab/llama"
)

// The KV Packet property through the store, on real and random weights: a
// document prefilled alone at position 0, Put, and Assembled at offset
// delta equals the document prefilled alone at delta, and generation
// continues from the assembled cache as from recompute.
//
// Tolerances (lab/llama's packet tests measure the same quantities
// with reconstruct.ShiftF32; these add only the storage rounding):
//   - f32 storage (stories260K): layer 0 values bit-identical; layer 0
//     keys within 1e-6 x the layer's max |K|; deeper layers' keys and
//     values within 1e-5 x the layer's max; continued next-token logits
//     within 1e-5 x max |logit|, same argmax.
//   - bf16 storage (random Llama-3.1-shaped: head dim 128, rotate-half,
//     llama3 scaling): layer 0 values bit-identical to the recompute's
//     rounded to bf16; keys within (sqrt(2)+1) x 2^-8 x |their rotated
//     pair| + 1e-5 x max (one rounding of the stored key, rotated across
//     its pair, and one of the shifted result); values within 2^-8 x |v| +
//     1e-5 x max; continued logits within 0.05 x max |logit|, same argmax.

type modelCase struct {
	name  string
	model func(t *testing.T) *llama.Model
	dtype format.DType
	delta int64
}

var llama31Small = llama.Config{Dim: 256, Hidden: 256, Layers: 2, Heads: 2, KVHeads: 2, Vocab: 128, SeqLen: 131072,
	NormEps: 1e-5, RoPE: format.RoPE{Style: format.RoPERotateHalf, Theta: 500000, Scaling: format.RoPEScalingLlama3,
		Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OriginalMaxPos: 8192}}

func storiesModel(t *testing.T) *llama.Model {
	t.Helper()
	m, err := llama.Load(testenv.ModelFile(t, "stories260K.bin"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func randomLlama31(t *testing.T) *llama.Model {
	t.Helper()
	m, err := llama.Random(llama31Small, 1)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

var modelCases = []modelCase{
	{"stories260K-f32/delta37", storiesModel, format.DTypeF32, 37},
	{"stories260K-f32/delta300", storiesModel, format.DTypeF32, 300},
	{"random-llama3.1-bf16/delta37", randomLlama31, format.DTypeBF16, 37},
	{"random-llama3.1-bf16/delta100000", randomLlama31, format.DTypeBF16, 100000},
}

// cachePacket turns a prefilled cache into a packet of spec.
func cachePacket(t *testing.T, spec *format.ModelSpec, doc []int, c *llama.Cache) *Packet {
	t.Helper()
	p := &Packet{PacketDesc: format.PacketDesc{Namespace: "ns", Model: spec}}
	for _, tok := range doc {
		p.TokenIDs = append(p.TokenIDs, uint32(tok))
	}
	for _, kv := range c.Layers {
		var l Layer
		for _, x := range []struct {
			dst *[]byte
			src []float32
		}{{&l.K, kv.K}, {&l.V, kv.V}} {
			*x.dst = make([]byte, len(x.src)*spec.DType.Size())
			if err := format.FromF32(*x.dst, x.src, spec.DType); err != nil {
				t.Fatal(err)
			}
		}
		p.Layers = append(p.Layers, l)
	}
	return p
}

// destCache turns a contiguous destination into a cache at positions
// first, first+1, ...
func destCache(t *testing.T, spec *format.ModelSpec, d *Dest, tokens int, first int64) *llama.Cache {
	t.Helper()
	c := &llama.Cache{KVHeads: spec.KVHeads, HeadDim: spec.HeadDim, Layers: make([]llama.LayerKV, spec.Layers)}
	for l := range c.Layers {
		c.Layers[l] = llama.LayerKV{K: toF32(t, d.K[l], spec.DType), V: toF32(t, d.V[l], spec.DType)}
	}
	for i := range tokens {
		c.Positions = append(c.Positions, first+int64(i))
	}
	return c
}

func modelDoc(m *llama.Model) []int {
	doc := make([]int, 24)
	for i := range doc {
		doc[i] = (i*37 + 5) % m.Vocab
	}
	return doc
}

func TestAssembleEqualsPrefillAtDelta(t *testing.T) {
	for _, tc := range modelCases {
		t.Run(tc.name, func(t *testing.T) {
			m := tc.model(t)
			spec := m.Spec(tc.dtype, tc.name)
			doc, next := modelDoc(m), []int{3, 7, 11, 2}
			at0, err := m.Forward(doc, 0, nil, llama.ForwardOptions{})
			if err != nil {
				t.Fatal(err)
			}
			db, _, _ := openKind(t, true, false)
			defer db.Close()
			id, err := db.Put(context.Background(), cachePacket(t, spec, doc, at0.Cache))
			if err != nil {
				t.Fatal(err)
			}
			d := NewContiguousDest(spec, len(doc))
			if err := db.Assemble(context.Background(), "ns", spec.Fingerprint(), []AssembleItem{{id, tc.delta}}, d, nil); err != nil {
				t.Fatal(err)
			}
			got := destCache(t, spec, d, len(doc), tc.delta)
			atDelta, err := m.Forward(doc, tc.delta, nil, llama.ForwardOptions{})
			if err != nil {
				t.Fatal(err)
			}
			compareCaches(t, spec, got, atDelta.Cache)

			recompute, err := m.Forward(append(append([]int{}, doc...), next...), tc.delta, nil, llama.ForwardOptions{})
			if err != nil {
				t.Fatal(err)
			}
			cont, err := m.Forward(next, tc.delta+int64(len(doc)), got, llama.ForwardOptions{})
			if err != nil {
				t.Fatal(err)
			}
			tol := 1e-5
			if tc.dtype == format.DTypeBF16 {
				tol = 0.05
			}
			for i := range next {
				exp := recompute.Logits[len(doc)+i]
				if diff, mag := maxAbsDiff(cont.Logits[i], exp); diff > tol*mag {
					t.Errorf("token %d after the assembled cache: logits differ by %g (max %g)", i, diff, mag)
				}
				if argmax(cont.Logits[i]) != argmax(exp) {
					t.Errorf("token %d: argmax %d, recompute %d", i, argmax(cont.Logits[i]), argmax(exp))
				}
			}
		})
	}
}

// compareCaches checks an assembled cache against the prefill at delta
// within the tolerances stated above.
func compareCaches(t *testing.T, spec *format.ModelSpec, got, want *llama.Cache) {
	t.Helper()
	bf16 := spec.DType == format.DTypeBF16
	for l := range want.Layers {
		g, w := got.Layers[l], want.Layers[l]
		_, magK := maxAbsDiff(w.K, w.K)
		_, magV := maxAbsDiff(w.V, w.V)
		if l == 0 {
			wantV := w.V
			if bf16 {
				wantV = toF32(t, cachePacketBytes(t, w.V, spec.DType), spec.DType)
			}
			for i := range wantV {
				if math.Float32bits(g.V[i]) != math.Float32bits(wantV[i]) {
					t.Fatalf("layer 0 value %d: %v, recompute %v: not bit-identical", i, g.V[i], wantV[i])
				}
			}
		}
		relK, relV := 1e-5, 1e-5
		if l == 0 {
			relK = 1e-6
		}
		norms := pairNorms(spec, w.K)
		for i := range w.K {
			tol := relK * magK
			if bf16 {
				tol = (math.Sqrt2+1)*math.Ldexp(norms[i], -8) + 1e-5*magK
			}
			if diff := math.Abs(float64(g.K[i] - w.K[i])); diff > tol {
				t.Fatalf("layer %d key %d: %v, recompute %v (tolerance %g)", l, i, g.K[i], w.K[i], tol)
			}
		}
		for i := range w.V {
			tol := relV * magV
			if bf16 {
				tol = math.Ldexp(math.Abs(float64(w.V[i])), -8) + 1e-5*magV
			}
			if diff := math.Abs(float64(g.V[i] - w.V[i])); diff > tol {
				t.Fatalf("layer %d value %d: %v, recompute %v (tolerance %g)", l, i, g.V[i], w.V[i], tol)
			}
		}
	}
}

func cachePacketBytes(t *testing.T, x []float32, dt format.DType) []byte {
	t.Helper()
	b := make([]byte, len(x)*dt.Size())
	if err := format.FromF32(b, x, dt); err != nil {
		t.Fatal(err)
	}
	return b
}

// maxAbsDiff returns max |a-b| and max(|a|, |b|).
func maxAbsDiff(a, b []float32) (diff, mag float64) {
	for i := range a {
		diff = math.Max(diff, math.Abs(float64(a[i]-b[i])))
		mag = math.Max(mag, math.Max(math.Abs(float64(a[i])), math.Abs(float64(b[i]))))
	}
	return diff, mag
}

func argmax(x []float32) int {
	best := 0
	for i, v := range x {
		if v > x[best] {
			best = i
		}
	}
	return best
}
