package adapter

import (
	"slices"
	"testing"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/lab/llama"
)

// CachePacket carries doc's token ids and every layer's keys and values,
// converted to the spec's dtype, and names no adapter.
func TestCachePacket(t *testing.T) {
	m := testModel(t)
	spec := m.Spec(format.DTypeBF16, "test")
	doc := []int{3, 4, 5, 6}
	out, err := m.Forward(doc, 0, nil, llama.ForwardOptions{LastOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	k, v := out.Cache.KeysValues()
	p, err := CachePacket(spec, "ns", doc, &KV{KVHeads: spec.KVHeads, HeadDim: spec.HeadDim, K: k, V: v})
	if err != nil {
		t.Fatal(err)
	}
	if p.Namespace != "ns" || p.Model != spec || p.AdapterID != "" || !slices.Equal(p.TokenIDs, []uint32{3, 4, 5, 6}) {
		t.Fatalf("packet: namespace %q, model %p (want %p), adapter %q, tokens %v", p.Namespace, p.Model, spec, p.AdapterID, p.TokenIDs)
	}
	if len(p.Layers) != len(out.Cache.Layers) {
		t.Fatalf("%d layers, want %d", len(p.Layers), len(out.Cache.Layers))
	}
	for l, kv := range out.Cache.Layers {
		for _, c := range []struct {
			name string
			f32  []float32
			got  []byte
		}{{"K", kv.K, p.Layers[l].K}, {"V", kv.V, p.Layers[l].V}} {
			want := make([]byte, len(c.f32)*2)
			if err := format.FromF32(want, c.f32, format.DTypeBF16); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(c.got, want) {
				t.Fatalf("layer %d %s: %d bytes differ from the cache's in bf16 (%d bytes)", l, c.name, len(c.got), len(want))
			}
		}
	}
}
