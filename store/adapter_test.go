package store_test

import (
	"context"
	"errors"
	"testing"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store"
)

// adapterPacket is a packet of spec with 2 header rows, 3 document rows
// and 1 trailer row, naming adapter id.
func adapterPacket(spec *format.ModelSpec, id string) *store.Packet {
	p := &store.Packet{PacketDesc: format.PacketDesc{Namespace: "ns", Model: spec, AdapterID: id, HeaderTokens: 2, TrailerTokens: 1, TokenIDs: []uint32{7, 8, 9}}}
	n := spec.KVHeads * p.Tokens() * spec.HeadDim * spec.DType.Size()
	for range spec.Layers {
		p.Layers = append(p.Layers, store.Layer{K: make([]byte, n), V: make([]byte, n)})
	}
	return p
}

// Put refuses a packet naming an adapter the store does not hold for the
// packet's model, writes nothing then, and takes it once the adapter is
// stored; an adapter stored for another model does not count.
func TestPutRequiresItsAdapter(t *testing.T) {
	db, err := store.Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	spec := &format.ModelSpec{Architecture: "llama", Layers: 2, KVHeads: 1, HeadDim: 4, DType: format.DTypeF32,
		RoPE: format.RoPE{Style: format.RoPEInterleaved, Theta: 10000}, WeightsID: "a"}
	other := *spec
	other.WeightsID = "b"
	list := func() int {
		ids, _, err := db.List("ns", spec.Fingerprint(), nil, 100)
		if err != nil {
			t.Fatal(err)
		}
		return len(ids)
	}

	if _, err := db.Put(context.Background(), adapterPacket(spec, "v1")); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("no adapter stored: %v, want ErrNotFound", err)
	}
	if err := db.PutArtifact(other.Fingerprint(), store.AdapterArtifact("v1"), []byte("x"), store.ArtifactMeta{}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Put(context.Background(), adapterPacket(spec, "v1")); !errors.Is(err, store.ErrModelMismatch) {
		t.Fatalf("adapter stored for another model only: %v, want ErrModelMismatch", err)
	}
	if n := list(); n != 0 {
		t.Fatalf("%d packets stored by refused Puts", n)
	}
	if err := db.PutArtifact(spec.Fingerprint(), store.AdapterArtifact("v1"), []byte("x"), store.ArtifactMeta{}); err != nil {
		t.Fatal(err)
	}
	id, err := db.Put(context.Background(), adapterPacket(spec, "v1"))
	if err != nil {
		t.Fatal(err)
	}
	if want := format.ComputePacketID("ns", spec.Fingerprint(), "v1", []uint32{7, 8, 9}); id != want {
		t.Fatalf("id %s, want %s", id.Short(), want.Short())
	}
	if _, err := db.Put(context.Background(), adapterPacket(spec, "v2")); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("another adapter id: %v, want ErrNotFound", err)
	}
	// Without an adapter id there is nothing to check.
	if _, err := db.Put(context.Background(), adapterPacket(spec, "")); err != nil {
		t.Fatal(err)
	}
	if n := list(); n != 2 {
		t.Fatalf("%d packets, want 2", n)
	}
}
