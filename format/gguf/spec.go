package gguf

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"

	"github.com/zeebo/blake3"

	"github.com/kvstore/kvstore/format"
)

// neoxArchitectures use llama.cpp's rope type NEOX (rotate-half pairs);
// every other architecture this package accepts uses type NORM
// (interleaved pairs, as llama and llama2.c do). From llama_model_rope_type
// in llama.cpp's src/llama-model.cpp, for the architectures whose KV cache
// is a plain per-layer K and V.
var neoxArchitectures = map[string]bool{
	"qwen": true, "qwen2": true, "qwen2moe": true, "qwen3": true, "qwen3moe": true,
	"phi2": true, "phi3": true, "gemma": true, "gemma2": true, "gemma3": true,
	"stablelm": true, "gptneox": true, "falcon": true, "starcoder2": true, "olmo2": true,
	"exaone": true, "minicpm3": true, "nemotron": true, "bitnet": true,
}

// normArchitectures use rope type NORM.
var normArchitectures = map[string]bool{
	"llama": true, "mistral": true, "baichuan": true, "starcoder": true, "internlm2": true,
	"minicpm": true, "xverse": true, "command-r": true, "cohere2": true, "olmo": true,
	"deci": true, "granite": true, "chameleon": true, "solar": true,
}

// Spec derives the KV layout of the model in f: layers, KV heads, head dim
// and RoPE from its metadata, packets stored in dtype, and a WeightsID that
// is the BLAKE3-256 of the tensor table and every tensor's bytes, so that
// two files with the same shapes but other weights get other fingerprints.
// A file this package cannot describe faithfully (an unknown architecture,
// per-layer head counts that differ, a RoPE frequency table, unknown
// scaling) is format.ErrInvalidArgument; bad metadata types
// format.ErrCorruption.
func (f *File) Spec(dtype format.DType) (*format.ModelSpec, error) {
	m, err := f.shape()
	if err != nil {
		return nil, fmt.Errorf("gguf: model spec: %w", err)
	}
	m.DType = dtype
	if m.WeightsID, err = f.WeightsID(); err != nil {
		return nil, err
	}
	if err := m.Validate(); err != nil {
		return nil, fmt.Errorf("gguf: model spec: %w", err)
	}
	return m, nil
}

func (f *File) shape() (*format.ModelSpec, error) {
	arch, err := f.str("general.architecture")
	if err != nil {
		return nil, err
	}
	m := &format.ModelSpec{Architecture: arch}
	switch {
	case normArchitectures[arch]:
		m.RoPE.Style = format.RoPEInterleaved
	case neoxArchitectures[arch]:
		m.RoPE.Style = format.RoPERotateHalf
	default:
		return nil, fmt.Errorf("%w: architecture %q is not one whose KV cache this package knows", format.ErrInvalidArgument, arch)
	}
	if m.Layers, err = f.int(arch+".block_count", -1); err != nil {
		return nil, err
	}
	embd, err := f.int(arch+".embedding_length", -1)
	if err != nil {
		return nil, err
	}
	heads, err := f.perLayer(arch + ".attention.head_count")
	if err != nil {
		return nil, err
	}
	if m.KVHeads, err = f.perLayer(arch + ".attention.head_count_kv"); err != nil {
		if _, ok := f.Get(arch + ".attention.head_count_kv"); ok {
			return nil, err
		}
		m.KVHeads = heads
	}
	if heads <= 0 || embd%heads != 0 {
		return nil, fmt.Errorf("%w: embedding length %d is not a multiple of %d heads", format.ErrCorruption, embd, heads)
	}
	if m.HeadDim, err = f.int(arch+".attention.key_length", embd/heads); err != nil {
		return nil, err
	}
	if v, err := f.int(arch+".attention.value_length", m.HeadDim); err != nil || v != m.HeadDim {
		return nil, fmt.Errorf("%w: value length %d differs from key length %d (%v)", format.ErrInvalidArgument, v, m.HeadDim, err)
	}
	if err := f.rope(arch, m); err != nil {
		return nil, err
	}
	return m, nil
}

func (f *File) rope(arch string, m *format.ModelSpec) error {
	for _, t := range f.Tensors {
		if t.Name == "rope_freqs.weight" {
			return fmt.Errorf("%w: a rope_freqs tensor (per-dimension RoPE factors) has no kvstore RoPE equivalent here", format.ErrInvalidArgument)
		}
	}
	var err error
	if m.RoPE.Theta, err = f.float(arch+".rope.freq_base", 10000); err != nil {
		return err
	}
	rot, err := f.int(arch+".rope.dimension_count", m.HeadDim)
	if err != nil {
		return err
	}
	if rot != m.HeadDim {
		m.RoPE.RotaryDims = rot
	}
	kind := "none"
	if _, ok := f.Get(arch + ".rope.scaling.type"); ok {
		if kind, err = f.str(arch + ".rope.scaling.type"); err != nil {
			return err
		}
	}
	factor, err := f.float(arch+".rope.scaling.factor", 0)
	if err != nil {
		return err
	}
	if kind == "linear" && factor == 1 || factor == 0 && kind == "linear" {
		kind = "none"
	}
	switch kind {
	case "none":
	case "linear":
		m.RoPE.Scaling, m.RoPE.Factor = format.RoPEScalingLinear, factor
	case "yarn":
		m.RoPE.Scaling, m.RoPE.Factor = format.RoPEScalingYaRN, factor
		if m.RoPE.OriginalMaxPos, err = f.int(arch+".rope.scaling.original_context_length", -1); err != nil {
			return err
		}
		if m.RoPE.BetaFast, err = f.float(arch+".rope.scaling.yarn_beta_fast", 32); err != nil {
			return err
		}
		if m.RoPE.BetaSlow, err = f.float(arch+".rope.scaling.yarn_beta_slow", 1); err != nil {
			return err
		}
		if m.RoPE.AttentionFactor, err = f.float(arch+".rope.scaling.attn_factor", 0); err != nil {
			return err
		}
	default:
		return fmt.Errorf("%w: rope scaling %q not supported", format.ErrInvalidArgument, kind)
	}
	return nil
}

// str is a required string value.
func (f *File) str(key string) (string, error) {
	v, ok := f.Get(key)
	if !ok {
		return "", fmt.Errorf("%w: no %s", format.ErrInvalidArgument, key)
	}
	s, ok := v.Str()
	if !ok {
		return "", fmt.Errorf("%w: %s is a %v, want a string", format.ErrCorruption, key, v.Type)
	}
	return s, nil
}

// int is an integer value in [0, MaxInt32]; def < 0 makes it required.
func (f *File) int(key string, def int) (int, error) {
	v, ok := f.Get(key)
	if !ok {
		if def < 0 {
			return 0, fmt.Errorf("%w: no %s", format.ErrInvalidArgument, key)
		}
		return def, nil
	}
	i, ok := v.Int()
	if !ok || i < 0 || i > math.MaxInt32 {
		return 0, fmt.Errorf("%w: %s is not an integer in [0, 2^31)", format.ErrCorruption, key)
	}
	return int(i), nil
}

// float is a finite number, def when absent.
func (f *File) float(key string, def float64) (float64, error) {
	v, ok := f.Get(key)
	if !ok {
		return def, nil
	}
	x, ok := v.Float()
	if !ok || math.IsNaN(x) || math.IsInf(x, 0) {
		return 0, fmt.Errorf("%w: %s is not a finite number", format.ErrCorruption, key)
	}
	return x, nil
}

// perLayer is a count given as one integer or as one per layer (all equal).
func (f *File) perLayer(key string) (int, error) {
	v, ok := f.Get(key)
	if !ok {
		return 0, fmt.Errorf("%w: no %s", format.ErrInvalidArgument, key)
	}
	if v.Type != TypeArray {
		return f.int(key, -1)
	}
	xs, ok := v.Ints()
	if !ok || len(xs) == 0 {
		return 0, fmt.Errorf("%w: %s is not an integer array", format.ErrCorruption, key)
	}
	for _, x := range xs {
		if x != xs[0] {
			return 0, fmt.Errorf("%w: %s differs between layers", format.ErrInvalidArgument, key)
		}
	}
	if xs[0] <= 0 || xs[0] > math.MaxInt32 {
		return 0, fmt.Errorf("%w: %s = %d", format.ErrCorruption, key, xs[0])
	}
	return int(xs[0]), nil
}

// WeightsID is "gguf-blake3:" and the hex BLAKE3-256 of the tensor table
// (names, dims, types, in file order) and of every tensor's bytes. It reads
// every tensor once (a 4 GB model takes a few seconds).
func (f *File) WeightsID() (string, error) {
	h := blake3.New()
	var b [8]byte
	for _, t := range f.Tensors {
		binary.LittleEndian.PutUint64(b[:], uint64(len(t.Name)))
		h.Write(b[:])
		h.Write([]byte(t.Name))
		binary.LittleEndian.PutUint32(b[:], uint32(t.Type))
		h.Write(b[:4])
		binary.LittleEndian.PutUint32(b[:], uint32(len(t.Dims)))
		h.Write(b[:4])
		for _, d := range t.Dims {
			binary.LittleEndian.PutUint64(b[:], d)
			h.Write(b[:])
		}
	}
	buf := make([]byte, 1<<20)
	for _, t := range f.Tensors {
		sr := io.NewSectionReader(f.r, int64(f.DataOffset+t.Offset), int64(t.Size()))
		if _, err := io.CopyBuffer(h, sr, buf); err != nil {
			return "", fmt.Errorf("gguf: weights id: tensor %q: %w", t.Name, err)
		}
	}
	return fmt.Sprintf("gguf-blake3:%x", h.Sum(nil)), nil
}
