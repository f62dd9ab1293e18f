package store

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/kvstore/kvstore/codec"
	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/reconstruct"
)

// lowRankPacket is a packet whose keys are, per (layer, head), rank-r
// matrices before RoPE, stored rotated at their local positions as Put
// expects, and whose values are rank-r matrices.
func lowRankPacket(t *testing.T, spec *format.ModelSpec, tokens, r int, seed uint64) *Packet {
	t.Helper()
	rope, err := reconstruct.NewRoPE(spec.RoPE, spec.HeadDim)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(seed, 0x10a4))
	p := &Packet{PacketDesc: format.PacketDesc{Namespace: "ns", Model: spec, TokenIDs: make([]uint32, tokens), Codec: format.CodecLowRank}}
	for i := range p.TokenIDs {
		p.TokenIDs[i] = rng.Uint32N(1000)
	}
	d := spec.HeadDim
	f := make([]float32, spec.KVHeads*tokens*d)
	for range spec.Layers {
		var l Layer
		for kind, dst := range []*[]byte{&l.K, &l.V} {
			for h := range spec.KVHeads {
				u, w := make([]float64, tokens*r), make([]float64, r*d)
				for i := range u {
					u[i] = rng.NormFloat64()
				}
				for i := range w {
					w[i] = rng.NormFloat64()
				}
				for tk := range tokens {
					row := f[(h*tokens+tk)*d : (h*tokens+tk+1)*d]
					for j := range row {
						var s float64
						for c := range r {
							s += u[tk*r+c] * w[c*d+j]
						}
						row[j] = float32(s)
					}
					if kind == 0 {
						rope.Apply(row, int64(tk))
					}
				}
			}
			*dst = make([]byte, len(f)*spec.DType.Size())
			if err := format.FromF32(*dst, f, spec.DType); err != nil {
				t.Fatal(err)
			}
		}
		p.Layers = append(p.Layers, l)
	}
	return p
}

// TestCodecLowRankInStore stores a packet of rank-3 keys (before RoPE) and
// values under the low-rank codec: Put takes the RoPE from the packet's
// model (not from the options), every chunk is stored low rank and smaller, reads come back
// within the factors' f16 rounding, and Assemble at an offset equals the
// reference assembly of the decoded packet.
func TestCodecLowRankInStore(t *testing.T) {
	for _, dt := range []format.DType{format.DTypeF32, format.DTypeBF16} {
		t.Run(dt.String(), func(t *testing.T) {
			db, _, _ := openKind(t, false, false)
			defer db.Close()
			spec := testSpec(dt, 2, 2, 32)
			const tokens = 48
			p := lowRankPacket(t, spec, tokens, 3, 1)
			// A RoPE in the options is not the one keys were stored with:
			// Put must un-rotate with the model's.
			other := format.RoPE{Style: format.RoPEInterleaved, Theta: 500}
			p.CodecOptions = codec.Options{Rank: 3, RoPE: &other}
			id, err := db.Put(context.Background(), p)
			if err != nil {
				t.Fatal(err)
			}
			v, err := db.Get(context.Background(), "ns", spec.Fingerprint(), id)
			if err != nil {
				t.Fatal(err)
			}
			dec := *p
			dec.Layers = make([]Layer, len(p.Layers))
			for i, c := range v.Header().Chunks {
				if c.Codec != format.CodecLowRank || c.Length >= c.RawLength {
					t.Fatalf("chunk %d: codec %v, %d of %d bytes; want low rank, smaller", i, c.Codec, c.Length, c.RawLength)
				}
			}
			for l := range p.Layers {
				k, val, err := v.Layer(l)
				if err != nil {
					t.Fatal(err)
				}
				nearlyEqual(t, fmt.Sprintf("layer %d K", l), dt, k, p.Layers[l].K)
				nearlyEqual(t, fmt.Sprintf("layer %d V", l), dt, val, p.Layers[l].V)
				dec.Layers[l] = Layer{K: bytes.Clone(k), V: bytes.Clone(val)}
			}
			v.Release()
			for _, d := range []*Dest{NewContiguousDest(spec, tokens), pagedDest(spec, tokens, 4, 1)} {
				want := cloneDest(d)
				referenceAssemble(t, spec, []*Packet{&dec}, []int64{1000}, want)
				if err := db.Assemble(context.Background(), "ns", spec.Fingerprint(), []AssembleItem{{id, 1000}}, d, nil); err != nil {
					t.Fatal(err)
				}
				diffDest(t, d, want)
			}
		})
	}
}

// nearlyEqual checks got against want element by element within 1% of
// want's largest magnitude: f16 factors, then the dtype's rounding.
func nearlyEqual(t *testing.T, what string, dt format.DType, got, want []byte) {
	t.Helper()
	g, w := make([]float32, len(got)/dt.Size()), make([]float32, len(want)/dt.Size())
	if len(g) != len(w) {
		t.Fatalf("%s: %d elements, want %d", what, len(g), len(w))
	}
	if err := format.ToF32(g, got, dt); err != nil {
		t.Fatal(err)
	}
	if err := format.ToF32(w, want, dt); err != nil {
		t.Fatal(err)
	}
	var peak float64
	for _, x := range w {
		peak = max(peak, math.Abs(float64(x)))
	}
	for i := range w {
		if d := math.Abs(float64(g[i] - w[i])); !(d <= 0.01*peak) {
			t.Fatalf("%s: element %d: %v, stored %v (peak %v)", what, i, g[i], w[i], peak)
		}
	}
}
