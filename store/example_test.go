package store_test

import (
	"context"
	"fmt"
	"os"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store"
)

// exampleSpec is a tiny model: 2 layers, 1 KV head, head dim 4, f32.
var exampleSpec = &format.ModelSpec{Architecture: "llama", Layers: 2, KVHeads: 1, HeadDim: 4, DType: format.DTypeF32,
	WeightsID: "example", RoPE: format.RoPE{Style: format.RoPERotateHalf, Theta: 10000}}

// examplePacket is a document's KV cache as the model computed it, here
// made up: tokens, and per layer K and V of [KVHeads][tokens][HeadDim].
func examplePacket(tokens ...uint32) *store.Packet {
	p := &store.Packet{PacketDesc: format.PacketDesc{Namespace: "docs", Model: exampleSpec, TokenIDs: tokens}}
	n := exampleSpec.KVHeads * len(tokens) * exampleSpec.HeadDim * exampleSpec.DType.Size()
	for range exampleSpec.Layers {
		p.Layers = append(p.Layers, store.Layer{K: make([]byte, n), V: make([]byte, n)})
	}
	return p
}

// Open a store, take the handle of one (namespace, model), Put a
// document's KV cache as a packet, Get it back through a verified
// zero-copy view, and Assemble two packets at new positions into one cache
// for a request, into a destination the store sizes.
func Example() {
	ctx := context.Background() // a request's context: checked before writes, reads and between layers
	dir, _ := os.MkdirTemp("", "kvstore-example-")
	defer os.RemoveAll(dir)
	db, err := store.Open(dir, nil) // creates the store; nil: the default Options
	if err != nil {
		fmt.Println(err)
		return
	}
	defer db.Close()
	docs, err := db.Scope("docs", exampleSpec) // one handle per (namespace, model)
	if err != nil {
		fmt.Println(err)
		return
	}

	a, err := docs.Put(ctx, examplePacket(10, 11, 12)) // durable when Put returns
	if err != nil {
		fmt.Println(err)
		return
	}
	b, err := docs.Put(ctx, examplePacket(20, 21))
	if err != nil {
		fmt.Println(err)
		return
	}

	v, err := docs.Get(ctx, a)
	if err != nil {
		fmt.Println(err)
		return
	}
	k, _, err := v.Layer(1) // layer 1's keys, CRC-checked on first read
	fmt.Println("layer 1 K:", len(k), "bytes", err)
	v.Release()

	// Document b after a: its keys are re-rotated to positions 3 and 4.
	items := []store.AssembleItem{{ID: a, Offset: 0}, {ID: b, Offset: 3}}
	dst, err := docs.AssembleInto(ctx, items, store.DestShape{Layout: store.LayoutContiguous}, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("assembled:", len(dst.K), "layers of", len(dst.K[0]), "bytes")
	s := db.Stats()
	fmt.Println("puts", s.Puts, "assembles", s.Assembles, "packets", s.Packets)
	// Output:
	// layer 1 K: 48 bytes <nil>
	// assembled: 2 layers of 80 bytes
	// puts 2 assembles 1 packets 2
}
