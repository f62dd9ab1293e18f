package gpusource_test

import (
	"bytes"
	"context"
	"errors"
	"math"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/gpu"
	"github.com/kvstore/kvstore/segment"
	"github.com/kvstore/kvstore/store"
	"github.com/kvstore/kvstore/store/gpusource"
)

// Shape of the fixture: a small GQA model (2 layers, 2 KV heads, head dim
// 16) and a context long enough for several spans of both kinds.
const (
	tokens  = 96
	layers  = 2
	kvHeads = 2
	headDim = 16
)

// peaks are the tokens whose surprisal stands out, so that segment.Split
// starts spans there: spans of 10 to 16 tokens, those under 12 left
// unfactored by the segment options below.
var peaks = map[int]bool{10: true, 20: true, 34: true, 44: true, 60: true, 70: true, 84: true}

// fixture builds, stores and opens a span memory of deterministic
// pseudo-random keys and values through the public store API only.
func fixture(t *testing.T) (*store.SpanReader, *store.SpanMemory) {
	t.Helper()
	db, err := store.Open("/db", &store.Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := db.Close(); err != nil {
			t.Error(err)
		}
	})
	model := &format.ModelSpec{Architecture: "llama", Layers: layers, KVHeads: kvHeads, HeadDim: headDim,
		DType: format.DTypeF32, RoPE: format.RoPE{Style: format.RoPERotateHalf, Theta: 10000}, WeightsID: "gpusource-test"}
	in := &store.SpanInput{Model: model, Surprisal: make([]float32, tokens)}
	state := uint64(0x9e3779b97f4a7c15)
	next := func() float32 { // xorshift64, uniform in [-1, 1)
		state ^= state << 13
		state ^= state >> 7
		state ^= state << 17
		return float32(state>>40)/(1<<23) - 1
	}
	for range layers {
		k, v := make([]float32, kvHeads*tokens*headDim), make([]float32, kvHeads*tokens*headDim)
		for i := range k {
			k[i], v[i] = next(), next()
		}
		in.K, in.V = append(in.K, k), append(in.V, v)
	}
	in.Surprisal[0] = float32(math.NaN())
	for i := 1; i < tokens; i++ {
		in.Surprisal[i] = 1 + next()/4
		if peaks[i] {
			in.Surprisal[i] = 8
		}
	}
	m, err := db.BuildSpanMemory(in, &store.SpanOptions{
		Segment:       segment.Options{MinSpan: 8, MaxSpan: 16, MinFactored: 12},
		ProjectionDim: 8,
		// Random rows do not compress: factor every span anyway, which
		// is what these tests read.
		FactorAll: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.PutSpanMemory(context.Background(), "ns", "ctx", m); err != nil {
		t.Fatal(err)
	}
	r, err := db.OpenSpanMemory(context.Background(), "ns", m.Model.Fingerprint(), "ctx")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Release)
	return r, m
}

// spans returns the first factored span and an unfactored one; the
// fixture must have both.
func spans(t *testing.T, m *store.SpanMemory) (factored, unfactored int) {
	t.Helper()
	factored, unfactored = -1, -1
	for s, sp := range m.Segmentation.Spans {
		switch {
		case sp.Factored && factored < 0:
			factored = s
		case !sp.Factored:
			unfactored = s
		}
	}
	if factored < 0 || unfactored < 0 {
		t.Fatalf("fixture has factored span %d, unfactored span %d; want both", factored, unfactored)
	}
	return factored, unfactored
}

func TestSource(t *testing.T) {
	r, m := fixture(t)
	src := gpusource.New(r)
	s, unfactored := spans(t, m)
	key := gpu.SpanKey{Context: r.ID(), Layer: 1, Head: 0, Span: int32(s), Kind: format.ChunkV}
	n, err := src.SpanSize(key)
	if err != nil {
		t.Fatal(err)
	}
	want, err := r.FactorBytes(1, 0, s, format.ChunkV)
	if err != nil || n != len(want) {
		t.Fatalf("span size %d, stored block %d bytes (%v)", n, len(want), err)
	}
	dst := make([]byte, n)
	if err := src.ReadSpan(context.Background(), key, dst); err != nil || !bytes.Equal(dst, want) {
		t.Fatalf("read span: %v", err)
	}
	other := key
	other.Context[0] ^= 1
	if _, err := src.SpanSize(other); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("another context's key: %v", err)
	}
	if err := src.ReadSpan(context.Background(), other, dst); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("read of another context's key: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := src.ReadSpan(ctx, key, dst); !errors.Is(err, context.Canceled) {
		t.Fatalf("read with a cancelled context: %v", err)
	}
	if err := src.ReadSpan(context.Background(), key, dst[:n-1]); !errors.Is(err, store.ErrInvalidArgument) {
		t.Fatalf("short dst: %v", err)
	}
	unf := key
	unf.Span = int32(unfactored)
	if _, err := src.SpanSize(unf); !errors.Is(err, store.ErrInvalidArgument) {
		t.Fatalf("unfactored span: %v", err)
	}
}

// The prefetcher (CPU device) loads every requested block from the source.
func TestSourcePrefetch(t *testing.T) {
	r, m := fixture(t)
	src := gpusource.New(r)
	pf, err := gpu.NewPrefetcher(gpu.CPU(), src, gpu.PrefetchOptions{Budget: 1 << 20, Staging: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer pf.Close()
	var reqs []gpu.Request
	var bytesWanted int64
	for sp, info := range m.Segmentation.Spans {
		if !info.Factored {
			continue
		}
		for _, kind := range []format.ChunkKind{format.ChunkK, format.ChunkV} {
			k := gpu.SpanKey{Context: r.ID(), Layer: 0, Head: 1, Span: int32(sp), Kind: kind}
			reqs = append(reqs, gpu.Request{Key: k, Score: float32(sp)})
			n, err := src.SpanSize(k)
			if err != nil {
				t.Fatal(err)
			}
			bytesWanted += int64(n)
		}
	}
	if err := pf.Prefetch(context.Background(), reqs); err != nil {
		t.Fatal(err)
	}
	if st := pf.Stats(); st.Loads != int64(len(reqs)) || st.BytesMoved != bytesWanted {
		t.Fatalf("prefetcher loaded %d blocks, %d bytes; want %d, %d", st.Loads, st.BytesMoved, len(reqs), bytesWanted)
	}
}
