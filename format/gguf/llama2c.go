package gguf

import (
	"encoding/binary"
	"fmt"
	"io"

	"github.com/kvstore/kvstore/format"
)

// Llama2c is the shape of a llama2.c version-0 checkpoint: seven
// little-endian int32 (dim, hidden, layers, heads, kv_heads, vocab,
// seq_len; a negative vocab means an untied classifier follows), then
// float32 weights row-major [out][in]: token embedding, rms_att, wq, wk,
// wv, wo, rms_ffn, w1, w2, w3 (each for all layers), rms_final, two RoPE
// tables of seq_len x head_dim/2 (skipped), and the classifier when untied.
type Llama2c struct {
	Dim, Hidden, Layers, Heads, KVHeads, Vocab, SeqLen int
	Tied                                               bool
}

// WriteLlama2c converts a llama2.c checkpoint into a GGUF llama.cpp loads:
// architecture llama (its rope type NORM is llama2.c's interleaved RoPE, so
// Q and K are not permuted), theta 10000, RMSNorm eps 1e-5, tensor names
// token_embd, blk.N.{attn_norm,attn_q,attn_k,attn_v,attn_output,ffn_norm,
// ffn_gate,ffn_up,ffn_down}, output_norm, and output only when the
// classifier is not tied. The model has no tokenizer
// (tokenizer.ggml.model = "no_vocab"): callers feed token ids. name goes in
// general.name. A checkpoint whose size does not match its header is
// format.ErrCorruption.
func WriteLlama2c(w io.Writer, checkpoint []byte, name string) (Llama2c, error) {
	c, err := parseLlama2c(checkpoint)
	if err != nil {
		return c, fmt.Errorf("gguf: llama2.c checkpoint: %w", err)
	}
	kv := []KV{
		{"general.architecture", String("llama")},
		{"general.name", String(name)},
		{"general.alignment", Uint32(DefaultAlignment)},
		{"llama.context_length", Uint32(uint32(c.SeqLen))},
		{"llama.embedding_length", Uint32(uint32(c.Dim))},
		{"llama.block_count", Uint32(uint32(c.Layers))},
		{"llama.feed_forward_length", Uint32(uint32(c.Hidden))},
		{"llama.attention.head_count", Uint32(uint32(c.Heads))},
		{"llama.attention.head_count_kv", Uint32(uint32(c.KVHeads))},
		{"llama.attention.layer_norm_rms_epsilon", Float32(1e-5)},
		{"llama.rope.dimension_count", Uint32(uint32(c.Dim / c.Heads))},
		{"llama.rope.freq_base", Float32(10000)},
		{"llama.vocab_size", Uint32(uint32(c.Vocab))},
		{"tokenizer.ggml.model", String("no_vocab")},
	}
	return c, Write(w, kv, c.tensors(checkpoint))
}

func parseLlama2c(b []byte) (Llama2c, error) {
	var c Llama2c
	if len(b) < 28 {
		return c, fmt.Errorf("%w: %d bytes, shorter than the header", format.ErrCorruption, len(b))
	}
	h := make([]int, 7)
	for i := range h {
		h[i] = int(int32(binary.LittleEndian.Uint32(b[4*i:])))
	}
	c = Llama2c{Dim: h[0], Hidden: h[1], Layers: h[2], Heads: h[3], KVHeads: h[4], Vocab: h[5], SeqLen: h[6], Tied: h[5] > 0}
	if !c.Tied {
		c.Vocab = -c.Vocab
	}
	const lim = 1 << 16
	for _, v := range []int{c.Dim, c.Hidden, c.Layers, c.Heads, c.KVHeads, c.SeqLen} {
		if v <= 0 || v > lim {
			return c, fmt.Errorf("%w: header %v out of range", format.ErrCorruption, h)
		}
	}
	if c.Vocab <= 0 || c.Vocab > 1<<20 || c.Dim%c.Heads != 0 || c.Heads%c.KVHeads != 0 || (c.Dim/c.Heads)%2 != 0 {
		return c, fmt.Errorf("%w: header %v is not a Llama shape", format.ErrCorruption, h)
	}
	want := 28 + 4*c.floats()
	if int64(len(b)) != want {
		return c, fmt.Errorf("%w: %d bytes, header %v needs %d", format.ErrCorruption, len(b), h, want)
	}
	return c, nil
}

func (c Llama2c) floats() int64 {
	d, hd, L, v := int64(c.Dim), int64(c.Hidden), int64(c.Layers), int64(c.Vocab)
	kv := int64(c.KVHeads) * d / int64(c.Heads)
	n := v*d + L*(d+d*d+2*kv*d+d*d+d+3*hd*d) + d + int64(c.SeqLen)*(d/int64(c.Heads))
	if !c.Tied {
		n += v * d
	}
	return n
}

// tensors slices the checkpoint's weights into GGUF tensors, in GGUF's
// usual order (per block).
func (c Llama2c) tensors(b []byte) []TensorData {
	off := int64(28)
	take := func(n int64) []byte { s := b[off : off+4*n]; off += 4 * n; return s }
	d, hd, L, v := c.Dim, c.Hidden, c.Layers, c.Vocab
	kv := c.KVHeads * d / c.Heads
	embd := take(int64(v * d))
	per := func(n int) [][]byte {
		out := make([][]byte, L)
		for l := range out {
			out[l] = take(int64(n))
		}
		return out
	}
	attnNorm, wq, wk, wv, wo := per(d), per(d*d), per(kv*d), per(kv*d), per(d*d)
	ffnNorm, w1, w2, w3 := per(d), per(hd*d), per(d*hd), per(hd*d)
	final := take(int64(d))
	take(int64(c.SeqLen * (d / c.Heads))) // RoPE tables
	t := func(name string, data []byte, dims ...int) TensorData {
		u := make([]uint64, len(dims))
		for i, x := range dims {
			u[i] = uint64(x)
		}
		return TensorData{Tensor: Tensor{Name: name, Dims: u, Type: GGMLF32}, Data: data}
	}
	out := []TensorData{t("token_embd.weight", embd, d, v)}
	for l := range L {
		p := fmt.Sprintf("blk.%d.", l)
		out = append(out,
			t(p+"attn_norm.weight", attnNorm[l], d),
			t(p+"attn_q.weight", wq[l], d, d),
			t(p+"attn_k.weight", wk[l], d, kv),
			t(p+"attn_v.weight", wv[l], d, kv),
			t(p+"attn_output.weight", wo[l], d, d),
			t(p+"ffn_norm.weight", ffnNorm[l], d),
			t(p+"ffn_gate.weight", w1[l], d, hd),
			t(p+"ffn_down.weight", w2[l], hd, d),
			t(p+"ffn_up.weight", w3[l], d, hd),
		)
	}
	out = append(out, t("output_norm.weight", final, d))
	if !c.Tied {
		out = append(out, t("output.weight", take(int64(v*d)), d, v))
	}
	return out
}
