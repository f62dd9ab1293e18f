package fuzz

import (
	"bytes"
	"encoding/binary"
	"errors"
	"runtime"
	"slices"
	"testing"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/format/gguf"
)

// FuzzGGUF feeds whole GGUF files to the reader: it never panics, never
// allocates more than a small multiple of its input, fails only with
// format.ErrCorruption, and a file that parses re-encodes to one that
// parses to the same metadata, tensors and tensor bytes. Deriving a
// ModelSpec from whatever parsed fails only with a format sentinel.
func FuzzGGUF(f *testing.F) {
	for _, b := range ggufSeeds(f) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		g, err := gguf.Parse(b)
		runtime.ReadMemStats(&after)
		if got := after.TotalAlloc - before.TotalAlloc; got > 64*uint64(len(b))+64<<10 {
			t.Fatalf("parsing %d bytes allocated %d", len(b), got)
		}
		if err != nil {
			if !errors.Is(err, format.ErrCorruption) {
				t.Fatalf("error wraps no format sentinel: %v", err)
			}
			return
		}
		again, err := gguf.Reencode(g)
		if err != nil {
			t.Fatalf("parsed file does not re-encode: %v", err)
		}
		g2, err := gguf.Parse(again)
		if err != nil {
			t.Fatalf("re-encoded file does not parse: %v", err)
		}
		sameGGUF(t, g, g2)
		if _, err := g.Spec(format.DTypeF16); err != nil &&
			!errors.Is(err, format.ErrCorruption) && !errors.Is(err, format.ErrInvalidArgument) {
			t.Fatalf("spec error wraps no format sentinel: %v", err)
		}
	})
}

func sameGGUF(t *testing.T, a, b *gguf.File) {
	t.Helper()
	if len(a.KV) != len(b.KV) || len(a.Tensors) != len(b.Tensors) || a.Alignment != b.Alignment {
		t.Fatalf("re-encoded file has %d kv, %d tensors, alignment %d; want %d, %d, %d",
			len(b.KV), len(b.Tensors), b.Alignment, len(a.KV), len(a.Tensors), a.Alignment)
	}
	for i := range a.KV {
		x, y := a.KV[i], b.KV[i]
		xs, _ := x.Value.StringArray()
		ys, _ := y.Value.StringArray()
		xi, _ := x.Value.Ints()
		yi, _ := y.Value.Ints()
		xf, _ := x.Value.Float()
		yf, _ := y.Value.Float()
		xstr, _ := x.Value.Str()
		ystr, _ := y.Value.Str()
		if x.Key != y.Key || x.Value.Type != y.Value.Type || x.Value.Elem != y.Value.Elem || x.Value.Len() != y.Value.Len() ||
			!slices.Equal(xs, ys) || !slices.Equal(xi, yi) || xstr != ystr || (xf != yf && xf == xf) {
			t.Fatalf("kv %d: %q differs after re-encoding", i, x.Key)
		}
	}
	for i := range a.Tensors {
		x, y := a.Tensors[i], b.Tensors[i]
		if x.Name != y.Name || x.Type != y.Type || !slices.Equal(x.Dims, y.Dims) {
			t.Fatalf("tensor %d: %+v became %+v", i, x, y)
		}
		dx, err := a.TensorData(i)
		if err != nil {
			t.Fatal(err)
		}
		dy, err := b.TensorData(i)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(dx, dy) {
			t.Fatalf("tensor %q: bytes differ after re-encoding", x.Name)
		}
	}
}

// ggufSeeds are a small llama GGUF (good), one of every value type, and
// broken ones: truncated, huge counts, a tensor past the end, an overflowing
// dim product, a bad alignment.
func ggufSeeds(tb testing.TB) [][]byte {
	enc := func(kv []gguf.KV, ts []gguf.TensorData) []byte {
		var buf bytes.Buffer
		if err := gguf.Write(&buf, kv, ts); err != nil {
			tb.Fatal(err)
		}
		return buf.Bytes()
	}
	w := func(name string, dims ...uint64) gguf.TensorData {
		n := uint64(4)
		for _, d := range dims {
			n *= d
		}
		data := make([]byte, n)
		for i := range data {
			data[i] = byte(i * 7)
		}
		return gguf.TensorData{Tensor: gguf.Tensor{Name: name, Dims: dims, Type: gguf.GGMLF32}, Data: data}
	}
	llama := enc([]gguf.KV{
		{Key: "general.architecture", Value: gguf.String("llama")},
		{Key: "llama.block_count", Value: gguf.Uint32(1)},
		{Key: "llama.embedding_length", Value: gguf.Uint32(8)},
		{Key: "llama.attention.head_count", Value: gguf.Uint32(2)},
		{Key: "llama.attention.head_count_kv", Value: gguf.Uint32(1)},
		{Key: "llama.rope.freq_base", Value: gguf.Float32(10000)},
		{Key: "tokenizer.ggml.tokens", Value: gguf.Strings([]string{"a", "b", "<s>"})},
		{Key: "tokenizer.ggml.token_type", Value: gguf.Uint32s([]uint32{1, 1, 3})},
	}, []gguf.TensorData{w("token_embd.weight", 8, 3), w("blk.0.attn_norm.weight", 8)})
	types := enc([]gguf.KV{
		{Key: "u32", Value: gguf.Uint32(7)}, {Key: "i32", Value: gguf.Int32(-7)},
		{Key: "u64", Value: gguf.Uint64(1 << 40)}, {Key: "f32", Value: gguf.Float32(0.5)},
		{Key: "f64", Value: gguf.Float64(-0.25)}, {Key: "bool", Value: gguf.Bool(true)},
		{Key: "general.alignment", Value: gguf.Uint32(64)},
	}, []gguf.TensorData{w("t", 2, 2)})
	seeds := [][]byte{llama, types, llama[:len(llama)/2], llama[:40]}
	patch := func(b []byte, off int, v uint64) []byte {
		c := bytes.Clone(b)
		binary.LittleEndian.PutUint64(c[off:], v)
		return c
	}
	seeds = append(seeds,
		patch(llama, 8, 1<<40),  // tensor count
		patch(llama, 16, 1<<40), // kv count
		patch(llama, 24, 1<<62), // first key length
	)
	// The last tensor's offset past the end, and a dim product overflow.
	if i := bytes.LastIndex(llama, []byte("blk.0.attn_norm.weight")); i > 0 {
		o := i + len("blk.0.attn_norm.weight")
		seeds = append(seeds, patch(llama, o+4+8+4, 1<<20), patch(llama, o+4, 1<<63))
	}
	return seeds
}
