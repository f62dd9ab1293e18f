package adapter

import (
	"context"
	"errors"
	"math"
	"testing"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/format/safetensors"
	"github.com/kvstore/kvstore/lab/llama"
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

// prefillCache is a.Prefill of doc as a lab/llama cache.
func prefillCache(t testing.TB, m *llama.Model, a *Adapter, doc []int) *llama.Cache {
	t.Helper()
	kv, err := a.Prefill(m, doc)
	if err != nil {
		t.Fatal(err)
	}
	c, err := m.CacheOf(kv.K, kv.V)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// rows splits flat rows of d values.
func rows(x []float32, d int) [][]float32 {
	var out [][]float32
	for i := 0; i+d <= len(x); i += d {
		out = append(out, x[i:i+d:i+d])
	}
	return out
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
	c := prefillCache(t, m, a, doc)
	if c.Len() != 2+4+3 || c.Positions[0] != 0 || c.Positions[8] != 8 {
		t.Fatalf("%d rows at %v", c.Len(), c.Positions)
	}
	x, err := a.Rows(m, doc)
	if err != nil {
		t.Fatal(err)
	}
	want, err := m.ForwardEmbeddings(rows(x, m.Dim), 0, nil, llama.ForwardOptions{})
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
	if err != nil || c0.Rows() != 4 {
		t.Fatalf("no adapter: %v, %d rows", err, c0.Rows())
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
	if _, err := db.Put(context.Background(), p); !errors.Is(err, store.ErrNotFound) {
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
	pid, err := db.Put(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	if pid != format.ComputePacketID("ns", spec.Fingerprint(), id, p.TokenIDs) {
		t.Fatal("packet id does not carry the adapter id")
	}
}

// InitToken's header rows are the token's embedding and its trailer rows
// the mean row; with HideHeader a packet holds the document's and
// trailer's rows of the full [header; doc; trailer] prefill, re-rotated to
// start at position 0.
func TestInitTokenHiddenHeader(t *testing.T) {
	m := testModel(t)
	a, err := InitToken(m, 2, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	bos, _ := m.Embed([]int{1})
	mean, _ := m.EmbeddingStats()
	for i, v := range a.Header {
		if v != bos[0][i%m.Dim] {
			t.Fatalf("header value %d is %v, not the token's %v", i, v, bos[0][i%m.Dim])
		}
	}
	for i, v := range a.Trailer {
		if v != float32(mean[i]) {
			t.Fatalf("trailer value %d is %v, not the mean %v", i, v, mean[i])
		}
	}
	if !a.HideHeader || a.StoredHeaderRows() != 0 {
		t.Fatalf("hide %v, %d stored header rows", a.HideHeader, a.StoredHeaderRows())
	}
	doc := []int{4, 5, 6}
	c := prefillCache(t, m, a, doc)
	if c.Len() != len(doc)+1 || c.Positions[0] != 0 {
		t.Fatalf("%d rows at %v, want %d from 0", c.Len(), c.Positions, len(doc)+1)
	}
	x, _ := a.Rows(m, doc)
	full, err := m.ForwardEmbeddings(rows(x, m.Dim), 0, nil, llama.ForwardOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := full.Cache.Slice(2, full.Cache.Len())
	if err := want.Shift(m.RoPE(), -2); err != nil {
		t.Fatal(err)
	}
	for l := range c.Layers {
		for i, v := range c.Layers[l].V {
			if v != want.Layers[l].V[i] || c.Layers[l].K[i] != want.Layers[l].K[i] {
				t.Fatalf("layer %d value %d differs from the full prefill's", l, i)
			}
		}
	}
	// The rows kept are not the plain prefill's: the header shaped them.
	plain := prefillCache(t, m, nil, doc)
	if plain.Layers[1].V[0] == c.Layers[1].V[0] {
		t.Fatal("the hidden header changed nothing")
	}
	b, err := a.Encode(safetensors.F32)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Decode(b)
	if err != nil || !got.HideHeader || got.ID() != a.ID() {
		t.Fatalf("round trip: %v, hide %v", err, got != nil && got.HideHeader)
	}
	vis := *a
	vis.HideHeader = false
	if vis.ID() == a.ID() {
		t.Fatal("hiding the header does not change the id")
	}
	p, err := Packet(m, m.Spec(format.DTypeF32, "test"), "ns", a.ID(), a, doc)
	if err != nil || p.Tokens() != len(doc)+1 || p.HeaderTokens != 0 || p.TrailerTokens != 1 {
		t.Fatalf("packet: %v", err)
	}
	if _, err := InitToken(m, 1, 1, m.Vocab); !errors.Is(err, format.ErrInvalidArgument) {
		t.Fatalf("a token outside the vocabulary: %v", err)
	}
}

// InitText's header rows are the text's embeddings, one per token, hidden;
// an empty text or a token outside the vocabulary is refused.
func TestInitText(t *testing.T) {
	m := testModel(t)
	text := []int{3, 7, 7, 2}
	a, err := InitText(m, text, 1)
	if err != nil {
		t.Fatal(err)
	}
	if a.HeaderRows() != len(text) || a.TrailerRows() != 1 || !a.HideHeader || a.StoredHeaderRows() != 0 {
		t.Fatalf("%d header rows (%d stored), %d trailer, hide %v", a.HeaderRows(), a.StoredHeaderRows(), a.TrailerRows(), a.HideHeader)
	}
	emb, _ := m.Embed(text)
	for r := range text {
		for j := range m.Dim {
			if a.Header[r*m.Dim+j] != emb[r][j] {
				t.Fatalf("header row %d value %d is not token %d's embedding", r, j, text[r])
			}
		}
	}
	// A document prefilled after the text keeps the rows the full
	// [text; doc] prefill gives it.
	doc := []int{4, 5, 6}
	c := prefillCache(t, m, a, doc)
	full, err := m.Forward(append(append([]int(nil), text...), doc...), 0, nil, llama.ForwardOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := full.Cache.Slice(len(text), len(text)+len(doc))
	if err := want.Shift(m.RoPE(), -int64(len(text))); err != nil {
		t.Fatal(err)
	}
	for l := range want.Layers {
		for i, v := range want.Layers[l].V {
			if math.Abs(float64(v-c.Layers[l].V[i])) > 1e-5 || math.Abs(float64(want.Layers[l].K[i]-c.Layers[l].K[i])) > 1e-5 {
				t.Fatalf("layer %d value %d: %v %v, the text's prefill gives %v %v", l, i, c.Layers[l].K[i], c.Layers[l].V[i], want.Layers[l].K[i], v)
			}
		}
	}
	for _, bad := range [][]int{nil, {1, 99}, {-1}} {
		if _, err := InitText(m, bad, 0); !errors.Is(err, format.ErrInvalidArgument) {
			t.Fatalf("text %v: %v, want ErrInvalidArgument", bad, err)
		}
	}
	if _, err := InitToken(m, 0, 0, 99); !errors.Is(err, format.ErrInvalidArgument) {
		t.Fatalf("token outside the vocabulary: %v", err)
	}
}
