package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/reconstruct"
)

// pairNorms gives each element of rows of spec's heads the norm of its
// rotated pair (its own magnitude past the rotary dims).
func pairNorms(spec *format.ModelSpec, x []float32) []float64 {
	hd, rot, half := spec.HeadDim, spec.Rotary(), spec.RoPE.Style == format.RoPERotateHalf
	n := make([]float64, len(x))
	for i := range x {
		n[i] = math.Abs(float64(x[i]))
		d := i % hd
		if d >= rot {
			continue
		}
		other := i ^ 1
		if half && d < rot/2 {
			other = i + rot/2
		} else if half {
			other = i - rot/2
		}
		n[i] = math.Hypot(float64(x[i]), float64(x[other]))
	}
	return n
}

func toF32(t *testing.T, b []byte, dt format.DType) []float32 {
	t.Helper()
	f := make([]float32, len(b)/dt.Size())
	if err := format.ToF32(f, b, dt); err != nil {
		t.Fatal(err)
	}
	return f
}

// TestPutNormalisesBasePosition puts keys given at base s and assembles
// them at offset s: the caller's keys come back within two roundings of
// Shift (reconstruct.Shift's stated round-trip bound per dtype: 1e-6 for
// f32, 1.25*2^-7 for bf16, 1.25*2^-10 for f16, times the pair's norm).
// The stored keys are the caller's rotated by -s, the caller's buffers are
// untouched, values are stored as given and the header records s.
func TestPutNormalisesBasePosition(t *testing.T) {
	cases := []struct {
		dt  format.DType
		tol float64
	}{
		{format.DTypeF32, 1e-6},
		{format.DTypeBF16, 1.25 * math.Ldexp(1, -7)},
		{format.DTypeF16, 1.25 * math.Ldexp(1, -10)},
	}
	for _, c := range cases {
		for _, base := range []int{1, 37, 5000} {
			t.Run(fmt.Sprintf("%v/base%d", c.dt, base), func(t *testing.T) {
				spec := &format.ModelSpec{Architecture: "test", Layers: 2, KVHeads: 2, HeadDim: 32, DType: c.dt,
					RoPE: format.RoPE{Style: format.RoPERotateHalf, Theta: 500000, Scaling: format.RoPEScalingLlama3,
						Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OriginalMaxPos: 8192}, WeightsID: "w"}
				db := openMem(t, vfs.NewMem(), nil)
				defer db.Close()
				p := floatPacket(spec, "ns", 9, 0, 0, uint64(base))
				p.BasePosition = base
				orig := cloneLayers(p.Layers)
				id, err := db.Put(context.Background(), p)
				if err != nil {
					t.Fatal(err)
				}
				for l := range p.Layers {
					if !bytes.Equal(p.Layers[l].K, orig[l].K) || !bytes.Equal(p.Layers[l].V, orig[l].V) {
						t.Fatalf("Put modified the caller's layer %d", l)
					}
				}
				checkStoredNormalised(t, db, p, id, base)
				d := NewContiguousDest(spec, 9)
				if err := db.Assemble(context.Background(), "ns", spec.Fingerprint(), []AssembleItem{{id, int64(base)}}, d, nil); err != nil {
					t.Fatal(err)
				}
				for l := range p.Layers {
					if !bytes.Equal(d.V[l], p.Layers[l].V) {
						t.Fatalf("layer %d: values changed", l)
					}
					want := toF32(t, p.Layers[l].K, c.dt)
					got := toF32(t, d.K[l], c.dt)
					norms := pairNorms(spec, want)
					for i := range want {
						tol := 2*c.tol*norms[i] + math.Ldexp(1, -24)
						if diff := math.Abs(float64(got[i] - want[i])); diff > tol {
							t.Fatalf("layer %d element %d: %v back, put %v (tolerance %g)", l, i, got[i], want[i], tol)
						}
					}
				}
			})
		}
	}
}

// checkStoredNormalised checks that packet id holds p's keys rotated by
// -base, bit for bit, and records base.
func checkStoredNormalised(t *testing.T, db *DB, p *Packet, id format.PacketID, base int) {
	t.Helper()
	v, err := db.Get(context.Background(), "ns", p.Model.Fingerprint(), id)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Release()
	if v.Header().BasePosition != int64(base) {
		t.Fatalf("header base position %d, want %d", v.Header().BasePosition, base)
	}
	r, err := reconstruct.NewRoPE(p.Model.RoPE, p.Model.HeadDim)
	if err != nil {
		t.Fatal(err)
	}
	for l := range p.Layers {
		want := make([]byte, len(p.Layers[l].K))
		if err := reconstruct.Shift(want, p.Layers[l].K, p.Model.DType, r, p.Model.KVHeads, p.Tokens(), -int64(base)); err != nil {
			t.Fatal(err)
		}
		k, val, err := v.Layer(l)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(k, want) || !bytes.Equal(val, p.Layers[l].V) {
			t.Fatalf("layer %d: stored keys are not the caller's rotated by %d (or values changed)", l, -base)
		}
		if bytes.Equal(k, p.Layers[l].K) {
			t.Fatalf("layer %d: keys stored unrotated", l)
		}
	}
}

func cloneLayers(ls []Layer) []Layer {
	out := make([]Layer, len(ls))
	for i, l := range ls {
		out[i] = Layer{K: bytes.Clone(l.K), V: bytes.Clone(l.V)}
	}
	return out
}

func TestPutRefusesNegativeBasePosition(t *testing.T) {
	spec := testSpec(format.DTypeBF16, 1, 1, 8)
	db := openMem(t, vfs.NewMem(), nil)
	defer db.Close()
	p := floatPacket(spec, "ns", 3, 0, 0, 1)
	p.BasePosition = -2
	if _, err := db.Put(context.Background(), p); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("Put at base -2: %v, want ErrInvalidArgument", err)
	}
}
