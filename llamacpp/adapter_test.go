//go:build (linux || darwin) && (amd64 || arm64)

package llamacpp_test

import (
	"context"
	"encoding/binary"
	"errors"
	"math"
	"testing"

	"github.com/kvstore/kvstore/adapter"
	"github.com/kvstore/kvstore/internal/testenv"
	"github.com/kvstore/kvstore/lab/llama"
	"github.com/kvstore/kvstore/llamacpp"
	"github.com/kvstore/kvstore/store"
)

func f32s(b []byte) []float32 {
	out := make([]float32, len(b)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}

// TestSaveAdapter: a document prefilled by llama.cpp as [header; document
// embeddings; trailer] and stored holds the KV lab/llama's adapter
// prefill computes (adapter.Prefill), with the adapter's id and row counts;
// BOS and two such packets assembled and loaded give the next-token logits
// the Go path gives (BOS alone, each packet re-rotated to its place, the
// question after them).
func TestSaveAdapter(t *testing.T) {
	for _, hide := range []bool{false, true} {
		t.Run(map[bool]string{false: "visible-header", true: "hidden-header"}[hide], func(t *testing.T) { testSaveAdapter(t, hide) })
	}
}

func testSaveAdapter(t *testing.T, hide bool) {
	const name = "gocode-hd64.bin"
	ref, err := llama.Load(testenv.ModelFile(t, name))
	if err != nil {
		t.Fatal(err)
	}
	m := model(t, name)
	emb, err := m.TokenEmbeddings()
	if err != nil {
		t.Fatal(err)
	}
	for _, tok := range []int{0, 1, 10, 255} {
		want, _ := ref.Embed([]int{tok})
		if d := maxDiff(emb.Rows[tok*emb.Dim:(tok+1)*emb.Dim], want[0]); d != 0 {
			t.Fatalf("token %d: GGUF embedding row differs from the checkpoint's by %g", tok, d)
		}
	}
	a, err := adapter.Init(ref, 3, 2, 11)
	if err != nil {
		t.Fatal(err)
	}
	a.HideHeader = hide
	o := llamacpp.ContextOptions{Ctx: 256, Cache: llamacpp.CacheF32}
	spec, err := m.Spec(o.Cache)
	if err != nil {
		t.Fatal(err)
	}
	db := openStore(t, t.TempDir())
	aid := a.ID()
	if err := adapter.Put(db, spec.Fingerprint(), aid, a); err != nil {
		t.Fatal(err)
	}
	docs := [][]int32{
		goPrompt("func Max(a, b int) int {\n\tif a > b {\n")[1:],
		goPrompt("\treturn b\n}\n\nfunc Abs(x int) int {\n")[1:],
	}
	query := goPrompt("\tif x < 0 {\n\t\treturn ")[1:]
	ctx := newContext(t, m, o)

	if err := ctx.Decode(0, 0, []int32{1}); err != nil {
		t.Fatal(err)
	}
	bos, err := llamacpp.Save(context.Background(), db, "ns", ctx, 0, []uint32{1})
	if err != nil {
		t.Fatal(err)
	}
	items := []store.AssembleItem{{ID: bos}}
	off := int64(1)
	var worst float64
	for i, d := range docs {
		id, err := llamacpp.SaveAdapter(context.Background(), db, "ns", ctx, 0, u32s(d), emb, a, aid)
		if err != nil {
			t.Fatalf("doc %d: %v", i, err)
		}
		items = append(items, store.AssembleItem{ID: id, Offset: off})
		rows := a.StoredHeaderRows() + len(d) + a.TrailerRows()
		off += int64(rows)

		v, err := db.Get(context.Background(), "ns", spec.Fingerprint(), id)
		if err != nil {
			t.Fatal(err)
		}
		h := v.Header()
		if h.AdapterID != aid || int(h.HeaderTokens) != a.StoredHeaderRows() || int(h.TrailerTokens) != a.TrailerRows() || int(h.Tokens) != rows {
			t.Fatalf("doc %d: packet of adapter %q, %d+%d adapter rows, %d rows", i, h.AdapterID, h.HeaderTokens, h.TrailerTokens, h.Tokens)
		}
		want, err := a.Prefill(ref, ints(d))
		if err != nil {
			t.Fatal(err)
		}
		for l := range v.Layers() {
			k, val, err := v.Layer(l)
			if err != nil {
				t.Fatal(err)
			}
			worst = max(worst, maxDiff(f32s(k), want.K[l]), maxDiff(f32s(val), want.V[l]))
		}
		v.Release()
	}
	t.Logf("adapter packets: max |KV difference| llama.cpp vs lab/llama %.3g", worst)
	if worst > 1e-4 {
		t.Fatalf("llama.cpp's adapter prefill differs from lab/llama's by %.3g", worst)
	}

	dst := newContext(t, m, o)
	l, err := llamacpp.Load(context.Background(), db, "ns", dst, 0, items, nil)
	if err != nil {
		t.Fatal(err)
	}
	if l.Next != int(off) || l.Packets[1].HeaderTokens != a.StoredHeaderRows() {
		t.Fatalf("loaded %+v, want %d cells", l, off)
	}
	if err := dst.Decode(0, l.Next, query); err != nil {
		t.Fatal(err)
	}
	got := dst.Logits()

	goCache, err := ref.Forward([]int{1}, 0, nil, llama.ForwardOptions{LastOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	all := goCache.Cache
	for _, d := range docs {
		kv, err := a.Prefill(ref, ints(d))
		if err != nil {
			t.Fatal(err)
		}
		c, err := ref.CacheOf(kv.K, kv.V)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Shift(ref.RoPE(), int64(all.Len())); err != nil {
			t.Fatal(err)
		}
		if err := all.Append(c); err != nil {
			t.Fatal(err)
		}
	}
	res, err := ref.Forward(ints(query), int64(all.Len()), all, llama.ForwardOptions{LastOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	d := maxDiff(got, res.Logits[0])
	t.Logf("BOS and %d adapter packets assembled, %d cells: max |logit difference| llama.cpp vs lab/llama %.3g", len(docs), l.Cells, d)
	if d > 1e-3 {
		t.Fatalf("assembled logits differ from the Go path by %.3g", d)
	}

	if _, err := llamacpp.SaveAdapter(context.Background(), db, "ns", ctx, 0, []uint32{1 << 20}, emb, a, aid); !errors.Is(err, llamacpp.ErrInvalidArgument) {
		t.Fatalf("a token outside the vocabulary: %v", err)
	}
	if _, err := llamacpp.SaveAdapter(context.Background(), db, "ns", ctx, 0, u32s(docs[0]), emb, a, "kvp-unknown"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("an adapter the store does not hold: %v", err)
	}
}

// TestAdapterModel: llama.cpp behind adapter.Model gives the reference
// model's adapters and KV. Init and InitToken draw the same adapter from
// either (the same embedding matrix, the same column statistics);
// adapter.Prefill through llama.cpp, decoded in batches smaller than the
// document, holds the KV lab/llama computes, from an F32 cache to float
// rounding and from an F16 cache to f16 rounding; the sequence keeps the
// cells.
func TestAdapterModel(t *testing.T) {
	const name = "gocode-hd64.bin"
	ref, err := llama.Load(testenv.ModelFile(t, name))
	if err != nil {
		t.Fatal(err)
	}
	m := model(t, name)
	emb, err := m.TokenEmbeddings()
	if err != nil {
		t.Fatal(err)
	}
	doc := ints(goPrompt("func Max(a, b int) int {\n\tif a > b {\n")[1:])
	for _, tc := range []struct {
		name  string
		cache llamacpp.CacheType
		tol   float64 // of max |difference| / max |reference value|
	}{
		{"f32", llamacpp.CacheF32, 1e-5},
		{"f16", llamacpp.CacheF16, 2e-3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := newContext(t, m, llamacpp.ContextOptions{Ctx: 128, Batch: 8, Cache: tc.cache, Seqs: 2})
			am, err := llamacpp.NewAdapterModel(ctx, 1, emb)
			if err != nil {
				t.Fatal(err)
			}
			if am.EmbeddingDim() != ref.Dim || am.RoPE().Config() != ref.RoPE().Config() {
				t.Fatalf("width %d, RoPE %+v; reference %d, %+v", am.EmbeddingDim(), am.RoPE().Config(), ref.Dim, ref.RoPE().Config())
			}
			a, err := adapter.Init(am, 3, 2, 11)
			if err != nil {
				t.Fatal(err)
			}
			if want, _ := adapter.Init(ref, 3, 2, 11); a.ID() != want.ID() {
				t.Fatalf("Init through llama.cpp gave %s, through lab/llama %s", a.ID(), want.ID())
			}
			tok, err := adapter.InitToken(am, 2, 1, 1)
			if err != nil {
				t.Fatal(err)
			}
			if want, _ := adapter.InitToken(ref, 2, 1, 1); tok.ID() != want.ID() {
				t.Fatalf("InitToken through llama.cpp gave %s, through lab/llama %s", tok.ID(), want.ID())
			}
			for i, b := range []*adapter.Adapter{nil, a, tok} {
				got, err := b.Prefill(am, doc)
				if err != nil {
					t.Fatal(err)
				}
				want, err := b.Prefill(ref, doc)
				if err != nil {
					t.Fatal(err)
				}
				if got.Rows() != want.Rows() || got.KVHeads != want.KVHeads || got.HeadDim != want.HeadDim || len(got.K) != len(want.K) {
					t.Fatalf("KV of %d rows, %d x %d, %d layers; reference %d, %d x %d, %d", got.Rows(), got.KVHeads, got.HeadDim, len(got.K),
						want.Rows(), want.KVHeads, want.HeadDim, len(want.K))
				}
				var diff, scale float64
				for l := range got.K {
					diff = max(diff, maxDiff(got.K[l], want.K[l]), maxDiff(got.V[l], want.V[l]))
					scale = max(scale, maxAbs(want.K[l]), maxAbs(want.V[l]))
				}
				t.Logf("%s: %d rows, max |KV difference| %.3g of max |value| %.3g", []string{"no adapter", "Init", "InitToken"}[i], got.Rows(), diff, scale)
				if diff > tc.tol*scale {
					t.Fatalf("llama.cpp's KV differs from lab/llama's by %.3g (max |value| %.3g)", diff, scale)
				}
				rows := len(doc)
				if b != nil {
					rows += b.HeaderRows() + b.TrailerRows() // the cells hold the hidden header too
				}
				if lo, hi := ctx.PosRange(1); lo != 0 || hi != rows-1 {
					t.Fatalf("sequence 1 holds positions [%d, %d], want [0, %d]", lo, hi, rows-1)
				}
			}
			if _, err := am.AppendEmbeddings(nil, []int{1, ref.Vocab}); !errors.Is(err, llamacpp.ErrInvalidArgument) {
				t.Fatalf("a token outside the vocabulary: %v", err)
			}
			if _, _, err := am.PrefillEmbeddings(make([]float32, (ctx.Cells()+1)*ref.Dim)); !errors.Is(err, llamacpp.ErrInvalidArgument) {
				t.Fatalf("more rows than cells: %v", err)
			}
			if _, err := llamacpp.NewAdapterModel(ctx, 2, emb); !errors.Is(err, llamacpp.ErrInvalidArgument) {
				t.Fatalf("a sequence the context does not have: %v", err)
			}
		})
	}
}

func maxAbs(x []float32) float64 {
	var m float64
	for _, v := range x {
		m = max(m, math.Abs(float64(v)))
	}
	return m
}
