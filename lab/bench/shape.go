package bench

import (
	"fmt"
	"strings"

	"github.com/kvstore/kvstore/format"
)

// Shape is the KV-cache layout of one model, with what the TTFT model needs
// to count the prefill FLOPs a packet replaces.
type Shape struct {
	Name    string
	Layers  int
	KVHeads int
	HeadDim int
	// Params is the model's parameter count (embeddings included).
	Params float64
	// QHeads is the number of query heads; QHeads*HeadDim is the width the
	// attention scores are computed over.
	QHeads int
	RoPE   format.RoPE
}

// The reference shapes of DESIGN.md.
var (
	Llama8B = Shape{
		Name: "llama8b", Layers: 32, KVHeads: 8, HeadDim: 128,
		Params: 8.03e9, QHeads: 32,
		RoPE: format.RoPE{
			Style: format.RoPERotateHalf, Theta: 500000,
			Scaling: format.RoPEScalingLlama3, Factor: 8,
			LowFreqFactor: 1, HighFreqFactor: 4, OriginalMaxPos: 8192,
		},
	}
	Qwen3B = Shape{
		Name: "qwen3b", Layers: 36, KVHeads: 2, HeadDim: 128,
		Params: 3.09e9, QHeads: 16,
		RoPE: format.RoPE{Style: format.RoPERotateHalf, Theta: 1000000},
	}
)

// Shapes are the shapes ParseShapes knows, by name.
var Shapes = []Shape{Llama8B, Qwen3B}

// ParseShapes parses a comma-separated list of shape names; "all" is every
// shape in Shapes.
func ParseShapes(s string) ([]Shape, error) {
	if s == "all" {
		return append([]Shape(nil), Shapes...), nil
	}
	var out []Shape
	for _, name := range strings.Split(s, ",") {
		sh, ok := shapeByName(strings.TrimSpace(name))
		if !ok {
			return nil, fmt.Errorf("%w: unknown shape %q (want llama8b, qwen3b or all)", format.ErrInvalidArgument, name)
		}
		out = append(out, sh)
	}
	return out, nil
}

func shapeByName(name string) (Shape, bool) {
	for _, sh := range Shapes {
		if sh.Name == name {
			return sh, true
		}
	}
	return Shape{}, false
}

// ChunkBytes is the size of one (layer, K|V) chunk of a packet of n tokens.
func (s Shape) ChunkBytes(tokens int) int {
	return s.KVHeads * tokens * s.HeadDim * format.DTypeBF16.Size()
}

// PacketBytes is the payload of a packet of n tokens: every layer's K and V.
func (s Shape) PacketBytes(tokens int) int64 {
	return int64(2*s.Layers) * int64(s.ChunkBytes(tokens))
}

// BytesPerToken is the bf16 KV cache one token occupies.
func (s Shape) BytesPerToken() int64 { return s.PacketBytes(1) }

// Spec is the model spec kvstore binds packets of this shape to.
func (s Shape) Spec() *format.ModelSpec {
	return &format.ModelSpec{
		Architecture: "llama",
		Layers:       s.Layers,
		KVHeads:      s.KVHeads,
		HeadDim:      s.HeadDim,
		DType:        format.DTypeBF16,
		RoPE:         s.RoPE,
		WeightsID:    "bench-synthetic-" + s.Name,
	}
}
