package adapter

import (
	"errors"
	"math"
	"testing"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/format/safetensors"
	"github.com/kvstore/kvstore/internal/llama"
	"github.com/kvstore/kvstore/store"
)

func testModel(t testing.TB) *llama.Model {
	t.Helper()
	m, err := llama.Random(llama.Config{Dim: 16, Hidden: 24, Layers: 2, Heads: 2, KVHeads: 1, Vocab: 32, SeqLen: 256,
		NormEps: 1e-5, RoPE: format.RoPE{Style: format.RoPEInterleaved, Theta: 10000}}, 2)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestInitDeterministic(t *testing.T) {
	m := testModel(t)
	a, err := Init(m, 3, 2, 7)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Init(m, 3, 2, 7)
	c, _ := Init(m, 3, 2, 8)
	if a.HeaderRows() != 3 || a.TrailerRows() != 2 || a.Bytes() != 4*5*16 {
		t.Fatalf("%d+%d rows, %d bytes", a.HeaderRows(), a.TrailerRows(), a.Bytes())
	}
	if a.ID() != b.ID() || a.ID() == c.ID() {
		t.Fatalf("ids %s %s %s: same seed must match, another seed differ", a.ID(), b.ID(), c.ID())
	}
	if _, err := Init(m, -1, 2, 1); !errors.Is(err, format.ErrInvalidArgument) {
		t.Fatal(err)
	}
}

// Prefill is ForwardEmbeddings over [header; doc; trailer] from position
// 0: N_h + len(doc) + N_t ordinary rows.
func TestPrefill(t *testing.T) {
	m := testModel(t)
	a, _ := Init(m, 2, 3, 1)
	doc := []int{4, 5, 6, 7}
	c, err := a.Prefill(m, doc)
	if err != nil {
		t.Fatal(err)
	}
	if c.Len() != 2+4+3 || c.Positions[0] != 0 || c.Positions[8] != 8 {
		t.Fatalf("%d rows at %v", c.Len(), c.Positions)
	}
	x, err := a.Rows(m, doc)
	if err != nil {
		t.Fatal(err)
	}
	want, err := m.ForwardEmbeddings(x, 0, nil, llama.ForwardOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for l := range c.Layers {
		for i, v := range c.Layers[l].K {
			if math.Float32bits(v) != math.Float32bits(want.Cache.Layers[l].K[i]) {
				t.Fatalf("layer %d key %d differs", l, i)
			}
		}
	}
	var none *Adapter
	c0, err := none.Prefill(m, doc)
	if err != nil || c0.Len() != 4 {
		t.Fatalf("no adapter: %v, %d rows", err, c0.Len())
	}
	bad := &Adapter{Dim: 8, Header: make([]float32, 8)}
	if _, err := bad.Prefill(m, doc); !errors.Is(err, format.ErrInvalidArgument) {
		t.Fatalf("adapter of another width: %v", err)
	}
}

func TestEncodeDecode(t *testing.T) {
	m := testModel(t)
	a, _ := Init(m, 2, 1, 1)
	a.TrainConfig = `{"lr":0.0005}`
	b, err := a.Encode(safetensors.F32)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if got.ID() != a.ID() || got.TrainConfig != a.TrainConfig {
		t.Fatalf("round trip: id %s vs %s, config %q", got.ID(), a.ID(), got.TrainConfig)
	}
	if _, err := Decode(b[:len(b)-1]); !errors.Is(err, format.ErrCorruption) {
		t.Fatalf("truncated: %v", err)
	}
}

// The store round trip: an adapter put for a model comes back for it only,
// and a packet naming it is accepted once it is stored.
func TestStore(t *testing.T) {
	m := testModel(t)
	db, err := store.Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	spec := m.Spec(format.DTypeF32, "test")
	a, _ := Init(m, 2, 2, 1)
	id := a.ID()
	p, err := Packet(m, spec, "ns", id, a, []int{3, 4, 5})
	if err != nil {
		t.Fatal(err)
	}
	if p.Tokens() != 7 || p.HeaderTokens != 2 || p.AdapterID != id {
		t.Fatalf("packet of %d rows, %d header, adapter %q", p.Tokens(), p.HeaderTokens, p.AdapterID)
	}
	if _, err := db.Put(p); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("put before the adapter: %v", err)
	}
	if err := Put(db, spec.Fingerprint(), id, a); err != nil {
		t.Fatal(err)
	}
	got, err := Get(db, spec.Fingerprint(), id)
	if err != nil || got.ID() != id {
		t.Fatalf("get: %v", err)
	}
	other := m.Spec(format.DTypeBF16, "test")
	if _, err := Get(db, other.Fingerprint(), id); !errors.Is(err, store.ErrModelMismatch) {
		t.Fatalf("get for another model: %v", err)
	}
	pid, err := db.Put(p)
	if err != nil {
		t.Fatal(err)
	}
	if pid != format.ComputePacketID("ns", spec.Fingerprint(), id, p.TokenIDs) {
		t.Fatal("packet id does not carry the adapter id")
	}
}
