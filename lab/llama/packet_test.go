package llama

import (
	"math"
	"testing"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/reconstruct"
)

// The KV Packet property on real and random weights: a document prefilled
// alone at position 0 and shifted by delta with reconstruct.Shift equals the
// document prefilled alone at delta, up to float rounding, and generation
// can continue from the shifted cache.
//
// Tolerances, from the measured errors with 5-10x margin:
//   - layer 0: values bit-identical (they do not depend on position);
//     pre-RoPE keys bit-identical; keys within 1e-6 x the layer's max |K|
//     (R(delta)R(t)k against R(t+delta)k: a few float32 roundings; measured
//     <= 2e-7).
//   - deeper layers, keys and values: within 1e-5 x the layer's max
//     (rounding differences travel through attention; measured <= 2e-6).
//   - next-token logits continuing from the shifted cache: within 1e-5 x
//     max |logit| (measured <= 2e-6).
//   - keys stored as bf16 (rounded, then shifted in bf16): each element
//     within (sqrt(2)+1) x 2^-8 x |its rotated pair| of the f32 keys
//     prefilled at delta, plus the f32 drift above: one rounding of the
//     stored key (rotated across its pair) and one of the shifted result.
//   - logits continuing from a bf16 cache (keys and values): within 0.05 x
//     max |logit| and the same argmax (measured <= 0.02).

type packetCase struct {
	name  string
	model func(testing.TB) *Model
	delta int64
}

var packetCases = []packetCase{
	{"stories260K/delta37", stories, 37},
	{"stories260K/delta300", stories, 300},
	{"random-llama3.1/delta37", func(t testing.TB) *Model { return random(t, llama31Shape, 1) }, 37},
	// far out: llama3's scaled low-frequency pairs turn by large angles
	{"random-llama3.1/delta100000", func(t testing.TB) *Model { return random(t, llama31Shape, 1) }, 100000},
}

func packetDoc(m *Model) []int {
	doc := make([]int, 24)
	for i := range doc {
		doc[i] = (i*37 + 5) % m.Vocab
	}
	return doc
}

func TestPacketShiftEqualsPrefillAtDelta(t *testing.T) {
	for _, tc := range packetCases {
		t.Run(tc.name, func(t *testing.T) {
			m := tc.model(t)
			doc := packetDoc(m)
			at0, err := m.Forward(doc, 0, nil, ForwardOptions{})
			if err != nil {
				t.Fatal(err)
			}
			atDelta, err := m.Forward(doc, tc.delta, nil, ForwardOptions{})
			if err != nil {
				t.Fatal(err)
			}
			shifted := at0.Cache.Clone()
			if err := shifted.Shift(m.RoPE(), tc.delta); err != nil {
				t.Fatal(err)
			}
			want := atDelta.Cache
			for i, p := range shifted.Positions {
				if p != want.Positions[i] {
					t.Fatalf("position %d: shifted %d, prefilled %d", i, p, want.Positions[i])
				}
			}
			for l := range shifted.Layers {
				got, exp := shifted.Layers[l], want.Layers[l]
				tolK, tolV := 1e-5, 1e-5
				if l == 0 {
					tolK, tolV = 1e-6, 0
					if !equal(got.KPre, exp.KPre) {
						t.Errorf("layer 0: pre-RoPE keys not bit-identical")
					}
				}
				if d, mag := maxAbs(got.K, exp.K); d > tolK*mag {
					t.Errorf("layer %d: keys differ by %g (max |K| %g, tolerance %g)", l, d, mag, tolK*mag)
				}
				if d, mag := maxAbs(got.V, exp.V); d > tolV*mag {
					t.Errorf("layer %d: values differ by %g (max |V| %g, tolerance %g)", l, d, mag, tolV*mag)
				}
			}
			checkBF16Keys(t, m, at0.Cache, want, tc.delta)
		})
	}
}

// checkBF16Keys stores the keys prefilled at 0 as bf16, shifts them in bf16
// and compares with the f32 keys prefilled at delta.
func checkBF16Keys(t *testing.T, m *Model, at0, atDelta *Cache, delta int64) {
	r := m.RoPE()
	for l := range at0.Layers {
		k := at0.Layers[l].K
		buf := make([]byte, 2*len(k))
		if err := format.FromF32(buf, k, format.DTypeBF16); err != nil {
			t.Fatal(err)
		}
		if err := reconstruct.Shift(buf, buf, format.DTypeBF16, r, m.KVHeads, at0.Len(), delta); err != nil {
			t.Fatal(err)
		}
		got := make([]float32, len(k))
		if err := format.ToF32(got, buf, format.DTypeBF16); err != nil {
			t.Fatal(err)
		}
		exp := atDelta.Layers[l].K
		_, mag := maxAbs(exp, exp)
		norms := rowPairNorms(r, exp)
		for i := range got {
			tol := (math.Sqrt2+1)*math.Ldexp(norms[i], -8) + 1e-5*mag
			if d := math.Abs(float64(got[i] - exp[i])); d > tol {
				t.Fatalf("layer %d element %d: bf16-shifted key %v, prefilled %v (tolerance %g)", l, i, got[i], exp[i], tol)
			}
		}
	}
}

// rowPairNorms gives each element of rows of r.HeadDim() the norm of its
// rotated pair (its own magnitude if it does not rotate).
func rowPairNorms(r *reconstruct.RoPE, x []float32) []float64 {
	hd, rot, half := r.HeadDim(), r.Rotary(), r.Config().Style == format.RoPERotateHalf
	n := make([]float64, len(x))
	for i := range x {
		n[i] = math.Abs(float64(x[i]))
		d := i % hd
		if d >= rot {
			continue
		}
		var other int
		switch {
		case half && d < rot/2:
			other = i + rot/2
		case half:
			other = i - rot/2
		default:
			other = i ^ 1
		}
		n[i] = math.Hypot(float64(x[i]), float64(x[other]))
	}
	return n
}

func TestPacketContinueFromShiftedCache(t *testing.T) {
	for _, tc := range packetCases {
		t.Run(tc.name, func(t *testing.T) {
			m := tc.model(t)
			doc, next := packetDoc(m), []int{3, 7, 11, 2}
			at0, err := m.Forward(doc, 0, nil, ForwardOptions{})
			if err != nil {
				t.Fatal(err)
			}
			recompute, err := m.Forward(append(append([]int{}, doc...), next...), tc.delta, nil, ForwardOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for _, storage := range []format.DType{format.DTypeF32, format.DTypeBF16} {
				cache := at0.Cache.Clone()
				if storage == format.DTypeBF16 {
					roundCache(t, cache)
				}
				if err := cache.Shift(m.RoPE(), tc.delta); err != nil {
					t.Fatal(err)
				}
				if storage == format.DTypeBF16 {
					roundCache(t, cache) // the shift's result is stored too
				}
				cont, err := m.Forward(next, tc.delta+int64(len(doc)), cache, ForwardOptions{})
				if err != nil {
					t.Fatal(err)
				}
				tol := 1e-5
				if storage == format.DTypeBF16 {
					tol = 0.05
				}
				for i := range next {
					exp := recompute.Logits[len(doc)+i]
					d, mag := maxAbs(cont.Logits[i], exp)
					if d > tol*mag {
						t.Errorf("%v token %d: logits differ by %g (max %g)", storage, i, d, mag)
					}
					if argmax(cont.Logits[i]) != argmax(exp) {
						t.Errorf("%v token %d: argmax %d, recompute %d", storage, i, argmax(cont.Logits[i]), argmax(exp))
					}
				}
			}
		})
	}
}

// roundCache rounds every K and V of c to bf16 and back.
func roundCache(t *testing.T, c *Cache) {
	for _, kv := range c.Layers {
		for _, x := range [][]float32{kv.K, kv.V} {
			b := make([]byte, 2*len(x))
			if err := format.FromF32(b, x, format.DTypeBF16); err != nil {
				t.Fatal(err)
			}
			if err := format.ToF32(x, b, format.DTypeBF16); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestCacheAppend assembles two independently prefilled documents, the
// second shifted after the first, and checks the layout and positions; a
// decode step over it runs and attends to both.
func TestCacheAppend(t *testing.T) {
	m := random(t, llama31Shape, 1)
	a, err := m.Forward([]int{1, 2, 3}, 0, nil, ForwardOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := m.Forward([]int{4, 5}, 0, nil, ForwardOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Cache.Shift(m.RoPE(), 3); err != nil {
		t.Fatal(err)
	}
	asm := a.Cache.Clone()
	if err := asm.Append(b.Cache); err != nil {
		t.Fatal(err)
	}
	hd := m.HeadDim()
	if asm.Len() != 5 || asm.Positions[3] != 3 || asm.Positions[4] != 4 {
		t.Fatalf("assembled %d rows at %v", asm.Len(), asm.Positions)
	}
	for l := range asm.Layers {
		// one KV head: rows are a's 3 then b's 2
		if !equal(asm.Layers[l].K[3*hd:5*hd], b.Cache.Layers[l].K) || !equal(asm.Layers[l].V[:3*hd], a.Cache.Layers[l].V) {
			t.Fatalf("layer %d: rows not concatenated", l)
		}
	}
	res, err := m.Forward([]int{6}, 5, asm, ForwardOptions{Attention: true})
	if err != nil {
		t.Fatal(err)
	}
	if row := res.Attention[0][0][0]; len(row) != 6 || row[0] == 0 || row[4] == 0 {
		t.Errorf("decode over the assembled cache: attention %v", row)
	}
}

func equal(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return true
}
