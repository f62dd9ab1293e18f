package gguf

import (
	"fmt"
	"math"
	"math/bits"
)

// GGMLType is a tensor's element type, ggml's enum ggml_type.
type GGMLType uint32

const (
	GGMLF32  GGMLType = 0
	GGMLF16  GGMLType = 1
	GGMLBF16 GGMLType = 30
)

// blockLayout is ggml's (elements per block, bytes per block) for the types
// this package can size; a tensor of another type is refused, since its
// bytes could not be bounds-checked.
var blockLayout = map[GGMLType][2]uint64{
	0: {1, 4}, 1: {1, 2}, 30: {1, 2}, 28: {1, 8}, // f32 f16 bf16 f64
	24: {1, 1}, 25: {1, 2}, 26: {1, 4}, 27: {1, 8}, // i8 i16 i32 i64
	2: {32, 18}, 3: {32, 20}, 6: {32, 22}, 7: {32, 24}, 8: {32, 34}, 9: {32, 36}, // q4_0 q4_1 q5_0 q5_1 q8_0 q8_1
	10: {256, 84}, 11: {256, 110}, 12: {256, 144}, 13: {256, 176}, 14: {256, 210}, 15: {256, 292}, // k-quants
	20: {32, 18}, 23: {256, 136}, 39: {32, 17}, // iq4_nl iq4_xs mxfp4
}

// Tensor describes one tensor: its name, dims (innermost first), type and
// the offset of its bytes from the start of the data section.
type Tensor struct {
	Name   string
	Dims   []uint64
	Type   GGMLType
	Offset uint64
}

// Elements is the product of the dims.
func (t *Tensor) Elements() uint64 {
	n := uint64(1)
	for _, d := range t.Dims {
		n *= d // bounded by checkDims
	}
	return n
}

// Size is the tensor's byte size (dims checked by the reader or writer).
func (t *Tensor) Size() uint64 {
	b := blockLayout[t.Type]
	return t.Elements() / b[0] * b[1]
}

// check validates the type and dims and returns the byte size.
func (t *Tensor) check() (uint64, error) {
	b, ok := blockLayout[t.Type]
	if !ok {
		return 0, fmt.Errorf("tensor %q: ggml type %d not supported", t.Name, t.Type)
	}
	if len(t.Dims) == 0 || len(t.Dims) > MaxDims {
		return 0, fmt.Errorf("tensor %q: %d dims not in [1, %d]", t.Name, len(t.Dims), MaxDims)
	}
	n := uint64(1)
	for _, d := range t.Dims {
		hi, lo := bits.Mul64(n, d)
		if d == 0 || hi != 0 || lo > math.MaxInt64 {
			return 0, fmt.Errorf("tensor %q: dims %v empty or overflow", t.Name, t.Dims)
		}
		n = lo
	}
	if t.Dims[0]%b[0] != 0 {
		return 0, fmt.Errorf("tensor %q: row of %d elements is not a whole number of %d-element blocks", t.Name, t.Dims[0], b[0])
	}
	hi, size := bits.Mul64(n/b[0], b[1])
	if hi != 0 || size > math.MaxInt64 {
		return 0, fmt.Errorf("tensor %q: size overflows", t.Name)
	}
	return size, nil
}
