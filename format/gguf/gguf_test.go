package gguf

import (
	"bytes"
	"errors"
	"os"
	"testing"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/internal/testenv"
)

func convert(t *testing.T, name string) []byte {
	t.Helper()
	ck, err := os.ReadFile(testenv.ModelFile(t, name))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := WriteLlama2c(&buf, ck, name); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestLlama2cSpec converts both test checkpoints and reads their specs back.
func TestLlama2cSpec(t *testing.T) {
	for _, c := range []struct {
		name                     string
		layers, kvHeads, headDim int
		tensors                  int
	}{
		{"stories260K.bin", 5, 4, 8, 1 + 5*9 + 1},
		{"gocode-hd64.bin", 4, 1, 64, 1 + 4*9 + 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := convert(t, c.name)
			f, err := Parse(b)
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			if len(f.Tensors) != c.tensors {
				t.Fatalf("%s: %d tensors, want %d", c.name, len(f.Tensors), c.tensors)
			}
			m, err := f.Spec(format.DTypeF32)
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			if m.Layers != c.layers || m.KVHeads != c.kvHeads || m.HeadDim != c.headDim ||
				m.RoPE.Style != format.RoPEInterleaved || m.RoPE.Theta != 10000 || m.RoPE.Scaling != format.RoPEScalingNone {
				t.Fatalf("%s: spec %+v", c.name, m)
			}
			// One weight changed: another weights id, the same shape.
			b[len(b)-1] ^= 1
			f2, err := Parse(b)
			if err != nil {
				t.Fatal(err)
			}
			m2, err := f2.Spec(format.DTypeF32)
			if err != nil {
				t.Fatal(err)
			}
			if m2.WeightsID == m.WeightsID || m2.Fingerprint() == m.Fingerprint() {
				t.Fatalf("%s: a changed weight kept weights id %s", c.name, m.WeightsID)
			}
		})
	}
}

// TestRoundTrip re-encodes a parsed file to the same bytes.
func TestRoundTrip(t *testing.T) {
	b := convert(t, "stories260K.bin")
	f, err := Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	again, err := Reencode(f)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again, b) {
		t.Fatalf("re-encoded file differs: %d vs %d bytes", len(again), len(b))
	}
}

// TestHostile: truncations and corrupted counts fail with ErrCorruption.
func TestHostile(t *testing.T) {
	b := convert(t, "stories260K.bin")
	for _, n := range []int{0, 3, 4, 8, 24, 100, 1000, len(b) / 2, len(b) - 1} {
		if _, err := Parse(b[:n]); !errors.Is(err, format.ErrCorruption) {
			t.Fatalf("truncated to %d: %v", n, err)
		}
	}
	for _, tc := range []struct {
		name string
		mut  func([]byte)
	}{
		{"magic", func(b []byte) { b[0] = 'X' }},
		{"version", func(b []byte) { b[4] = 9 }},
		{"tensor count", func(b []byte) { b[15] = 0x7f }},
		{"kv count", func(b []byte) { b[23] = 0x7f }},
		{"key length", func(b []byte) { b[31] = 0x7f }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := bytes.Clone(b)
			tc.mut(c)
			if _, err := Parse(c); !errors.Is(err, format.ErrCorruption) {
				t.Fatalf("%s: %v", tc.name, err)
			}
		})
	}
}

// TestSpecRefusals: metadata kvstore cannot describe is refused.
func TestSpecRefusals(t *testing.T) {
	base := []KV{
		{"general.architecture", String("llama")},
		{"llama.block_count", Uint32(2)},
		{"llama.embedding_length", Uint32(16)},
		{"llama.attention.head_count", Uint32(2)},
	}
	tensors := []TensorData{{Tensor: Tensor{Name: "w", Dims: []uint64{4}, Type: GGMLF32}, Data: make([]byte, 16)}}
	spec := func(t *testing.T, kv []KV) error {
		var buf bytes.Buffer
		if err := Write(&buf, kv, tensors); err != nil {
			t.Fatal(err)
		}
		f, err := Parse(buf.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		_, err = f.Spec(format.DTypeF16)
		return err
	}
	if err := spec(t, base); err != nil {
		t.Fatalf("base: %v", err)
	}
	for _, tc := range []struct {
		name  string
		extra KV
	}{
		{"per-layer kv heads", KV{"llama.attention.head_count_kv", Uint32s([]uint32{1, 2})}},
		{"longrope", KV{"llama.rope.scaling.type", String("longrope")}},
		{"string layers", KV{"llama.block_count", String("2")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kv := append([]KV{}, base...)
			if tc.extra.Key == "llama.block_count" {
				kv[1] = tc.extra
			} else {
				kv = append(kv, tc.extra)
			}
			if err := spec(t, kv); err == nil {
				t.Fatalf("%s: accepted", tc.name)
			}
		})
	}
	arch := append([]KV{}, base...)
	arch[0] = KV{"general.architecture", String("mamba")}
	if err := spec(t, arch); !errors.Is(err, format.ErrInvalidArgument) {
		t.Fatalf("mamba: %v", err)
	}
}

// TestSpecNeoxYarn: a rotate-half architecture with per-layer KV head
// counts, a key length, partial rotary dims and YaRN scaling.
func TestSpecNeoxYarn(t *testing.T) {
	var buf bytes.Buffer
	err := Write(&buf, []KV{
		{"general.architecture", String("qwen2")},
		{"qwen2.block_count", Uint32(2)},
		{"qwen2.embedding_length", Uint32(64)},
		{"qwen2.attention.head_count", Uint32(4)},
		{"qwen2.attention.head_count_kv", Uint32s([]uint32{2, 2})},
		{"qwen2.attention.key_length", Uint32(32)},
		{"qwen2.attention.value_length", Uint32(32)},
		{"qwen2.rope.dimension_count", Uint32(16)},
		{"qwen2.rope.freq_base", Float32(1e6)},
		{"qwen2.rope.scaling.type", String("yarn")},
		{"qwen2.rope.scaling.factor", Float32(4)},
		{"qwen2.rope.scaling.original_context_length", Uint32(32768)},
	}, []TensorData{{Tensor: Tensor{Name: "w", Dims: []uint64{32, 2}, Type: 8}, Data: make([]byte, 68)}})
	if err != nil {
		t.Fatal(err)
	}
	f, err := Parse(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	m, err := f.Spec(format.DTypeBF16)
	if err != nil {
		t.Fatal(err)
	}
	r := m.RoPE
	if m.Layers != 2 || m.KVHeads != 2 || m.HeadDim != 32 || r.Style != format.RoPERotateHalf || r.RotaryDims != 16 ||
		r.Theta != 1e6 || r.Scaling != format.RoPEScalingYaRN || r.Factor != 4 || r.OriginalMaxPos != 32768 {
		t.Fatalf("spec %+v", m)
	}
}
