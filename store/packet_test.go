package store

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/kvstore/kvstore/format"
)

// testSpec returns a valid model spec; odd head dims get a partial rotary
// width so that the spec validates.
func testSpec(dt format.DType, layers, kvHeads, headDim int) *format.ModelSpec {
	rope := format.RoPE{Style: format.RoPERotateHalf, Theta: 10000}
	if headDim%2 == 1 {
		rope.RotaryDims = headDim - 1
	}
	return &format.ModelSpec{
		Architecture: "test", Layers: layers, KVHeads: kvHeads, HeadDim: headDim,
		DType: dt, RoPE: rope, WeightsID: "w",
	}
}

// randPacket returns a packet of spec with random tokens and tensors; seed
// makes it reproducible and distinct.
func randPacket(spec *format.ModelSpec, ns string, tokens int, seed uint64) *Packet {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	p := &Packet{PacketDesc: format.PacketDesc{Namespace: ns, Model: spec, TokenIDs: make([]uint32, tokens)}}
	for i := range p.TokenIDs {
		p.TokenIDs[i] = rng.Uint32()
	}
	n := spec.KVHeads * tokens * spec.HeadDim * spec.DType.Size()
	for range spec.Layers {
		l := Layer{K: make([]byte, n), V: make([]byte, n)}
		fill(rng, l.K)
		fill(rng, l.V)
		p.Layers = append(p.Layers, l)
	}
	return p
}

func fill(rng *rand.Rand, b []byte) {
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
}

// quiet discards log lines: tests that close with views outstanding warn.
var quiet = slog.New(slog.DiscardHandler)

// openMem opens a store on fs at /db with small blob files.
func openMem(t testing.TB, fs vfs.FS, o *Options) *DB {
	t.Helper()
	if o == nil {
		o = &Options{}
	}
	o.FS = fs
	if o.Logger == nil {
		o.Logger = quiet
	}
	if o.BlobFileSize == 0 {
		o.BlobFileSize = 256 << 10
	}
	db, err := Open("/db", o)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return db
}

// checkPacket asserts that id reads back as p, every byte, CRCs verified.
func checkPacket(t testing.TB, db *DB, p *Packet, id format.PacketID) {
	t.Helper()
	v, err := db.Get(context.Background(), p.Namespace, p.Model.Fingerprint(), id)
	if err != nil {
		t.Fatalf("Get %s: %v", id.Short(), err)
	}
	defer v.Release()
	h := v.Header()
	if h.ID != id || h.Tokens != uint32(p.Tokens()) || int(h.Layers) != len(p.Layers) ||
		h.AdapterID != p.AdapterID || !equalU32(h.TokenIDs, p.TokenIDs) {
		t.Fatalf("header of %s does not match the packet: %+v", id.Short(), h)
	}
	for l := range p.Layers {
		k, val, err := v.Layer(l)
		if err != nil {
			t.Fatalf("Layer %d: %v", l, err)
		}
		if !bytes.Equal(k, p.Layers[l].K) || !bytes.Equal(val, p.Layers[l].V) {
			t.Fatalf("packet %s layer %d differs from what was put", id.Short(), l)
		}
	}
}

func equalU32(a, b []uint32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestPutRefusesBadPackets(t *testing.T) {
	spec := testSpec(format.DTypeBF16, 2, 2, 4)
	cases := []struct {
		name string
		edit func(p *Packet)
	}{
		{"no model", func(p *Packet) { p.Model = nil }},
		{"invalid model", func(p *Packet) { m := *p.Model; m.HeadDim = 0; p.Model = &m }},
		{"no tokens", func(p *Packet) { p.TokenIDs = nil; p.Layers = []Layer{{}, {}} }},
		{"negative adapter tokens", func(p *Packet) { p.HeaderTokens = -1 }},
		{"negative base position", func(p *Packet) { p.BasePosition = -1 }},
		{"too few layers", func(p *Packet) { p.Layers = p.Layers[:1] }},
		{"short K", func(p *Packet) { p.Layers[1].K = p.Layers[1].K[:3] }},
		{"long V", func(p *Packet) { p.Layers[0].V = append(p.Layers[0].V, 0) }},
		{"adapter rows without bytes", func(p *Packet) { p.HeaderTokens = 2 }},
		{"long namespace", func(p *Packet) { p.Namespace = strings.Repeat("n", format.MaxNameLen+1) }},
		{"long adapter id", func(p *Packet) { p.AdapterID = strings.Repeat("a", format.MaxNameLen+1) }},
	}
	db := openMem(t, vfs.NewMem(), nil)
	defer db.Close()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := randPacket(spec, "ns", 3, 1)
			c.edit(p)
			if _, err := db.Put(context.Background(), p); !errors.Is(err, ErrInvalidArgument) {
				t.Fatalf("Put: %v, want ErrInvalidArgument", err)
			}
		})
	}
	if s := db.Stats(); s.Puts != 0 || s.BytesWritten != 0 || len(s.BlobFiles) != 0 {
		t.Fatalf("refused puts wrote something: %+v", s)
	}
}
