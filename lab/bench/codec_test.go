package bench

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/kvstore/kvstore/codec"
	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/internal/testenv"
	"github.com/kvstore/kvstore/lab/llama"
)

// The codec benchmarks compare every chunk codec on two KV caches: the real
// one stories260K computes for a greedy continuation from BOS (5 layers,
// 4 KV heads, head dim 8), and the synthetic Llama-3.1-8B-shaped layer the
// peer benchmarks store (NewPacket; 8 KV heads, head dim 128). Each cache
// is converted to bf16 and to f16 chunks [kv_heads][tokens][head_dim], one
// per (layer, K|V), and each operation runs over all of a cache's chunks.

// kvChunk is one chunk of a benchmark cache.
type kvChunk struct {
	desc codec.Desc
	raw  []byte
}

const (
	realKVTokens  = 400  // stories260K: within its 512-token context
	synthKVTokens = 1000 // the reference document of DESIGN.md
)

var benchCodecs = []format.Codec{format.CodecRaw, format.CodecShuffleZstd, format.CodecInt8, format.CodecInt4}

// realKVCache prefills stories260K with its own greedy continuation of BOS,
// tokens long, and returns the cache; it skips tb when the model is absent.
func realKVCache(tb testing.TB, tokens int) *llama.Cache {
	tb.Helper()
	m, err := llama.Load(testenv.ModelFile(tb, "stories260K.bin"))
	if err != nil {
		tb.Fatal(err)
	}
	const bos = 1
	cont, err := m.Greedy([]int{bos}, tokens-1)
	if err != nil {
		tb.Fatal(err)
	}
	res, err := m.Forward(append([]int{bos}, cont...), 0, nil, llama.ForwardOptions{LastOnly: true})
	if err != nil {
		tb.Fatal(err)
	}
	return res.Cache
}

// cacheChunks converts c's keys (post-RoPE) and values to dt chunks,
// layer-major, K before V.
func cacheChunks(tb testing.TB, c *llama.Cache, dt format.DType) []kvChunk {
	tb.Helper()
	var out []kvChunk
	for _, l := range c.Layers {
		for _, kv := range []struct {
			kind format.ChunkKind
			x    []float32
		}{{format.ChunkK, l.K}, {format.ChunkV, l.V}} {
			d := codec.Desc{Kind: kv.kind, DType: dt, Heads: c.KVHeads, Tokens: c.Len(), HeadDim: c.HeadDim}
			raw := make([]byte, d.RawSize())
			if err := format.FromF32(raw, kv.x, dt); err != nil {
				tb.Fatal(err)
			}
			out = append(out, kvChunk{d, raw})
		}
	}
	return out
}

// synthChunks is layer 0 (K and V) of the synthetic Llama-3.1-8B packet of
// synthKVTokens tokens that the peer benchmarks store, in dt.
func synthChunks(tb testing.TB, dt format.DType) []kvChunk {
	tb.Helper()
	s := Llama8B
	s.Layers = 1 // chunks are generated per index: this is the full packet's layer 0
	pk := NewPacket(s, synthKVTokens, 1)
	var out []kvChunk
	for c, kind := range []format.ChunkKind{format.ChunkK, format.ChunkV} {
		d := codec.Desc{Kind: kind, DType: dt, Heads: s.KVHeads, Tokens: synthKVTokens, HeadDim: s.HeadDim}
		raw := pk.Chunk(c)
		if dt != format.DTypeBF16 {
			f := make([]float32, d.Elems())
			if err := format.ToF32(f, raw, format.DTypeBF16); err != nil {
				tb.Fatal(err)
			}
			raw = make([]byte, d.RawSize())
			if err := format.FromF32(raw, f, dt); err != nil {
				tb.Fatal(err)
			}
		}
		out = append(out, kvChunk{d, raw})
	}
	return out
}

// encodeAll encodes every chunk under c into its own buffer and returns the
// buffers and the stored bytes in all.
func encodeAll(tb testing.TB, chunks []kvChunk, c format.Codec) ([][]byte, int) {
	tb.Helper()
	enc := make([][]byte, len(chunks))
	n := 0
	for i, ch := range chunks {
		var err error
		if enc[i], err = codec.Encode(nil, ch.raw, c, ch.desc, codec.Options{}); err != nil {
			tb.Fatal(err)
		}
		n += len(enc[i])
	}
	return enc, n
}

func rawBytes(chunks []kvChunk) int {
	n := 0
	for _, ch := range chunks {
		n += len(ch.raw)
	}
	return n
}

// BenchmarkCodecKV reports, per cache, dtype and codec, encode and decode
// MB/s over all the cache's chunks and the ratio of raw to stored bytes,
// beside memcpy of the same bytes into the same destinations.
//
//	go test -run '^$' -bench '^BenchmarkCodecKV$' -benchtime 20x ./lab/bench
func BenchmarkCodecKV(b *testing.B) {
	for _, dt := range []format.DType{format.DTypeBF16, format.DTypeF16} {
		b.Run("stories260K/"+dt.String(), func(b *testing.B) {
			benchCodecSet(b, cacheChunks(b, realKVCache(b, realKVTokens), dt))
		})
		b.Run("synthetic-llama8b/"+dt.String(), func(b *testing.B) {
			benchCodecSet(b, synthChunks(b, dt))
		})
	}
}

func benchCodecSet(b *testing.B, chunks []kvChunk) {
	raw := rawBytes(chunks)
	dsts := make([][]byte, len(chunks))
	for i, ch := range chunks {
		dsts[i] = make([]byte, len(ch.raw))
	}
	b.Run("memcpy", func(b *testing.B) {
		b.SetBytes(int64(raw))
		b.ReportAllocs()
		for b.Loop() {
			for i, ch := range chunks {
				copy(dsts[i], ch.raw)
			}
		}
	})
	for _, c := range benchCodecs {
		enc, stored := encodeAll(b, chunks, c)
		ratio := float64(raw) / float64(stored)
		b.Run(fmt.Sprintf("%v/encode", c), func(b *testing.B) {
			bufs := make([][]byte, len(chunks))
			b.SetBytes(int64(raw))
			b.ReportAllocs()
			for b.Loop() {
				for i, ch := range chunks {
					bufs[i], _ = codec.Encode(bufs[i][:0], ch.raw, c, ch.desc, codec.Options{})
				}
			}
			b.ReportMetric(ratio, "ratio")
		})
		b.Run(fmt.Sprintf("%v/decode", c), func(b *testing.B) {
			b.SetBytes(int64(raw))
			b.ReportAllocs()
			for b.Loop() {
				for i, ch := range chunks {
					if err := codec.Decode(dsts[i], enc[i], c, ch.desc); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(ratio, "ratio")
		})
	}
}

// TestCacheChunks checks the conversion the codec benchmarks rely on: one
// chunk per (layer, K|V) of the right shape, holding the cache's values
// rounded to the dtype, which lossless codecs round-trip exactly and lossy
// ones decode to the same size.
func TestCacheChunks(t *testing.T) {
	c := realKVCache(t, 48)
	for _, dt := range []format.DType{format.DTypeBF16, format.DTypeF16} {
		chunks := cacheChunks(t, c, dt)
		if got, want := len(chunks), 2*len(c.Layers); got != want {
			t.Fatalf("%v: %d chunks, want %d", dt, got, want)
		}
		for i, ch := range chunks {
			src := c.Layers[i/2].K
			if i%2 == 1 {
				src = c.Layers[i/2].V
			}
			if ch.desc.Tokens != 48 || len(ch.raw) != len(src)*dt.Size() {
				t.Fatalf("%v chunk %d: %v, %d bytes for %d values", dt, i, ch.desc, len(ch.raw), len(src))
			}
			back := make([]float32, len(src))
			if err := format.ToF32(back, ch.raw, dt); err != nil {
				t.Fatal(err)
			}
			if want := roundTo(src[len(src)-1], dt); back[len(back)-1] != want {
				t.Fatalf("%v chunk %d: last value %v, want %v", dt, i, back[len(back)-1], want)
			}
			for _, cd := range benchCodecs {
				checkCodecRoundTrip(t, ch, cd)
			}
		}
	}
}

func roundTo(x float32, dt format.DType) float32 {
	if dt == format.DTypeF16 {
		return format.F16ToF32(format.F32ToF16(x))
	}
	return format.BF16ToF32(format.F32ToBF16(x))
}

func checkCodecRoundTrip(t *testing.T, ch kvChunk, c format.Codec) {
	t.Helper()
	enc, err := codec.Encode(nil, ch.raw, c, ch.desc, codec.Options{})
	if err != nil {
		t.Fatalf("%v %v: %v", c, ch.desc, err)
	}
	dst := make([]byte, len(ch.raw))
	if err := codec.Decode(dst, enc, c, ch.desc); err != nil {
		t.Fatalf("%v %v: %v", c, ch.desc, err)
	}
	lossless := c == format.CodecRaw || c == format.CodecShuffleZstd
	if lossless && !bytes.Equal(dst, ch.raw) {
		t.Fatalf("%v %v: lossless round trip changed the bytes", c, ch.desc)
	}
}
