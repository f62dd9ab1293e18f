package packet

import (
	"errors"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/prune"
)

// testSpec returns a valid bf16 model spec.
func testSpec(layers, kvHeads, headDim int) *format.ModelSpec {
	return &format.ModelSpec{
		Architecture: "test", Layers: layers, KVHeads: kvHeads, HeadDim: headDim, DType: format.DTypeBF16,
		RoPE: format.RoPE{Style: format.RoPERotateHalf, Theta: 10000}, WeightsID: "w",
	}
}

// randDesc returns a packet of spec with tokens random rows.
func randDesc(spec *format.ModelSpec, tokens int, seed uint64) *Desc {
	rng := rand.New(rand.NewPCG(seed, 1))
	d := &Desc{PacketDesc: format.PacketDesc{Namespace: "ns", Model: spec, TokenIDs: make([]uint32, tokens)}, Layers: make([]Layer, spec.Layers)}
	for i := range d.TokenIDs {
		d.TokenIDs[i] = rng.Uint32()
	}
	n := spec.KVHeads * tokens * spec.HeadDim * spec.DType.Size()
	for l := range d.Layers {
		d.Layers[l] = Layer{K: make([]byte, n), V: make([]byte, n)}
		for i := range n {
			// Small finite bf16 values: the high byte stays below 0x40.
			d.Layers[l].K[i], d.Layers[l].V[i] = byte(rng.Uint32()), byte(rng.Uint32()%0x40)
		}
	}
	return d
}

// idOf is d's packet id.
func idOf(d *Desc) format.PacketID {
	return format.ComputePacketID(d.Namespace, d.Model.Fingerprint(), d.AdapterID, d.TokenIDs)
}

// TestCheck: Check returns the stored length of a K|V chunk (of the kept
// rows when pruned) and refuses, with ErrInvalidArgument, every desc that
// does not describe a packet of its spec.
func TestCheck(t *testing.T) {
	spec := testSpec(2, 2, 4)
	d := randDesc(spec, 6, 1)
	if n, err := d.Check(); err != nil || n != 2*6*4*2 {
		t.Fatalf("Check = %d, %v; want %d", n, err, 2*6*4*2)
	}
	keep, err := prune.Random(2, 2, 6, 4, 7)
	if err != nil {
		t.Fatal(err)
	}
	d.Keep = keep
	if n, err := d.Check(); err != nil || n != 2*4*4*2 {
		t.Fatalf("pruned: Check = %d, %v; want %d", n, err, 2*4*4*2)
	}
	for _, tc := range []struct {
		name string
		edit func(d *Desc)
	}{
		{"no model", func(d *Desc) { d.Model = nil }},
		{"invalid model", func(d *Desc) { m := *d.Model; m.HeadDim = 0; d.Model = &m }},
		{"long namespace", func(d *Desc) { d.Namespace = strings.Repeat("n", format.MaxNameLen+1) }},
		{"long adapter id", func(d *Desc) { d.AdapterID = strings.Repeat("a", format.MaxNameLen+1) }},
		{"negative adapter", func(d *Desc) { d.TrailerTokens = -1 }},
		{"no tokens", func(d *Desc) { d.TokenIDs = nil; d.Layers = []Layer{{}, {}} }},
		{"too few layers", func(d *Desc) { d.Layers = d.Layers[:1] }},
		{"negative base", func(d *Desc) { d.BasePosition = -1 }},
		{"short K", func(d *Desc) { d.Layers[1].K = d.Layers[1].K[:3] }},
		{"adapter rows no data", func(d *Desc) { d.HeaderTokens = 1 }},
		{"unknown codec", func(d *Desc) { d.Codec = 200 }},
		{"codec options", func(d *Desc) { d.Codec = format.CodecInt8; d.CodecOptions.GroupSize = -1 }},
		{"keep-set shape", func(d *Desc) { d.Keep = &prune.Set{Layers: 2, KVHeads: 1, Tokens: 6, Keep: [][]int32{{0}, {1}}} }},
		{"keep-set ragged", func(d *Desc) {
			d.Keep = &prune.Set{Layers: 2, KVHeads: 2, Tokens: 6, Keep: [][]int32{{0}, {1}, {2}, {3, 4}}}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := randDesc(spec, 6, 1)
			tc.edit(d)
			_, err := d.Check()
			if !errors.Is(err, ErrInvalidArgument) {
				t.Fatalf("Check = %v, want ErrInvalidArgument", err)
			}
		})
	}
}
