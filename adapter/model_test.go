package adapter

import (
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/lab/llama"
	"github.com/kvstore/kvstore/reconstruct"
)

// The reference model is a Model.
var _ Model = (*llama.Model)(nil)

// ColumnStats of the embedding matrix is the reference model's
// EmbeddingStats bit for bit, so Init draws the same adapter from any
// Model whose embeddings are the same.
func TestColumnStats(t *testing.T) {
	m := testModel(t)
	all := make([]int, m.Vocab)
	for i := range all {
		all[i] = i
	}
	emb, err := m.AppendEmbeddings(nil, all)
	if err != nil {
		t.Fatal(err)
	}
	mean, std := ColumnStats(emb, m.Dim)
	wantMean, wantStd := m.EmbeddingStats()
	if !slices.Equal(mean, wantMean) || !slices.Equal(std, wantStd) {
		t.Fatalf("column statistics differ from the model's:\nmean %v\nwant %v\nstd %v\nwant %v", mean, wantMean, std, wantStd)
	}
	a, _ := Init(m, 2, 2, 5)
	b, _ := Init(&fakeModel{m: m}, 2, 2, 5)
	if a.ID() != b.ID() {
		t.Fatalf("Init through the stats of ColumnStats: %s, through the model's: %s", b.ID(), a.ID())
	}
}

// fakeModel is the reference model behind the Model interface alone,
// with its statistics from ColumnStats, and a prefill that can be broken.
type fakeModel struct {
	m       *llama.Model
	corrupt func(k, v [][]float32) ([][]float32, [][]float32)
}

func (f *fakeModel) EmbeddingDim() int       { return f.m.Dim }
func (f *fakeModel) RoPE() *reconstruct.RoPE { return f.m.RoPE() }
func (f *fakeModel) AppendEmbeddings(dst []float32, tokens []int) ([]float32, error) {
	return f.m.AppendEmbeddings(dst, tokens)
}
func (f *fakeModel) EmbeddingStats() (mean, std []float64) {
	all := make([]int, f.m.Vocab)
	for i := range all {
		all[i] = i
	}
	emb, _ := f.m.AppendEmbeddings(nil, all)
	return ColumnStats(emb, f.m.Dim)
}
func (f *fakeModel) PrefillEmbeddings(x []float32) (k, v [][]float32, err error) {
	k, v, err = f.m.PrefillEmbeddings(x)
	if err == nil && f.corrupt != nil {
		k, v = f.corrupt(k, v)
	}
	return k, v, err
}

// Prefill and Packet work through the interface alone, and refuse a
// model whose prefill does not return rows of the shape it says, a
// token outside the vocabulary and a KV of another model's shape.
func TestModelInterface(t *testing.T) {
	m := testModel(t)
	spec := m.Spec(format.DTypeF32, "test")
	a, _ := Init(m, 1, 2, 3)
	a.HideHeader = true
	doc := []int{5, 6, 7}
	want := prefillCache(t, m, a, doc)
	f := &fakeModel{m: m}
	kv, err := a.Prefill(f, doc)
	if err != nil {
		t.Fatal(err)
	}
	if kv.Rows() != len(doc)+2 || kv.KVHeads != m.KVHeads || kv.HeadDim != m.HeadDim() || len(kv.K) != m.Layers {
		t.Fatalf("KV of %d rows, %d heads x %d dims, %d layers", kv.Rows(), kv.KVHeads, kv.HeadDim, len(kv.K))
	}
	for l := range kv.K {
		if !slices.Equal(kv.K[l], want.Layers[l].K) || !slices.Equal(kv.V[l], want.Layers[l].V) {
			t.Fatalf("layer %d differs from the reference model's prefill", l)
		}
	}
	p, err := Packet(f, spec, "ns", a.ID(), a, doc)
	if err != nil || p.Tokens() != len(doc)+2 || p.HeaderTokens != 0 || p.TrailerTokens != 2 {
		t.Fatalf("packet: %v", err)
	}

	for _, tc := range []struct {
		name    string
		corrupt func(k, v [][]float32) ([][]float32, [][]float32)
	}{
		{"no layers", func(k, v [][]float32) ([][]float32, [][]float32) { return nil, nil }},
		{"a short layer", func(k, v [][]float32) ([][]float32, [][]float32) { k[1] = k[1][1:]; return k, v }},
		{"fewer V layers", func(k, v [][]float32) ([][]float32, [][]float32) { return k, v[:1] }},
		{"a row too many", func(k, v [][]float32) ([][]float32, [][]float32) {
			for l := range k {
				k[l], v[l] = append(k[l], k[l][:m.HeadDim()]...), append(v[l], v[l][:m.HeadDim()]...)
			}
			return k, v
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := a.Prefill(&fakeModel{m: m, corrupt: tc.corrupt}, doc); !errors.Is(err, format.ErrInvalidArgument) {
				t.Fatalf("prefill: %v", err)
			}
		})
	}
	if _, err := a.Prefill(f, []int{1, m.Vocab}); !errors.Is(err, format.ErrInvalidArgument) {
		t.Fatalf("a token outside the vocabulary: %v", err)
	}
	if _, err := a.Prefill(f, nil); !errors.Is(err, format.ErrInvalidArgument) {
		t.Fatalf("no tokens: %v", err)
	}
	other := *spec
	other.KVHeads = 2 * spec.KVHeads
	if _, err := Packet(f, &other, "ns", a.ID(), a, doc); !errors.Is(err, format.ErrInvalidArgument) {
		t.Fatalf("a spec of another shape: %v", err)
	}
	if _, err := CachePacket(spec, "ns", doc[:2], kv); !errors.Is(err, format.ErrInvalidArgument) {
		t.Fatalf("a KV of %d rows for 2 tokens: %v", kv.Rows(), err)
	}
}

// ColumnStats of a matrix with known columns.
func TestColumnStatsValues(t *testing.T) {
	mean, std := ColumnStats([]float32{1, 10, 3, 10}, 2)
	if mean[0] != 2 || mean[1] != 10 || std[0] != 1 || std[1] != 0 {
		t.Fatalf("mean %v std %v", mean, std)
	}
	if mean, std := ColumnStats(nil, 3); len(mean) != 3 || len(std) != 3 || math.Abs(mean[0]) != 0 {
		t.Fatalf("no rows: mean %v std %v", mean, std)
	}
}
