package codec

import (
	"fmt"
	"math"
	"math/bits"

	"github.com/kvstore/kvstore/format"
)

// maxRawSize bounds a chunk's decoded size (256 TiB on 64-bit platforms),
// well above what a valid packet header allows, so that every size this
// package computes from a Desc, 5x included, fits an int without overflow
// checks of its own.
const maxRawSize = min(1<<48, math.MaxInt/8)

// Desc says what a chunk holds: keys or values (which selects the int8/int4
// quantization axis when encoding; decoding reads it from the chunk), the
// dtype of the decoded tensor, and its shape [Heads][Tokens][HeadDim].
type Desc struct {
	Kind    format.ChunkKind
	DType   format.DType
	Heads   int
	Tokens  int
	HeadDim int
}

// DescOf returns the Desc of a chunk of a validated packet header.
func DescOf(c *format.ChunkDesc) (Desc, error) {
	if len(c.Shape) != 3 {
		return Desc{}, fmt.Errorf("%w: codec: chunk layer %d %v has shape %v, want 3 dims", format.ErrInvalidArgument, c.Layer, c.Kind, c.Shape)
	}
	d := Desc{Kind: c.Kind, DType: c.DType, Heads: int(c.Shape[0]), Tokens: int(c.Shape[1]), HeadDim: int(c.Shape[2])}
	if err := d.Validate(); err != nil {
		return Desc{}, err
	}
	if uint64(d.RawSize()) != c.RawLength {
		return Desc{}, fmt.Errorf("%w: codec: chunk layer %d %v raw length %d, shape gives %d", format.ErrInvalidArgument, c.Layer, c.Kind, c.RawLength, d.RawSize())
	}
	return d, nil
}

// Validate checks that d is a K or V chunk of a float dtype with every
// dimension >= 1 and at most 2^48 bytes in all; else ErrInvalidArgument.
func (d Desc) Validate() error {
	switch {
	case d.Kind != format.ChunkK && d.Kind != format.ChunkV:
		return d.invalid("kind %d is neither K nor V", d.Kind)
	case !d.DType.Float():
		return d.invalid("dtype %v is not f32, f16 or bf16", d.DType)
	case d.Heads < 1 || d.Tokens < 1 || d.HeadDim < 1:
		return d.invalid("a dimension is < 1")
	}
	n := uint64(d.DType.Size())
	for _, f := range []int{d.Heads, d.Tokens, d.HeadDim} {
		hi, lo := bits.Mul64(n, uint64(f))
		if hi != 0 || lo > maxRawSize {
			return d.invalid("more than %d bytes", maxRawSize)
		}
		n = lo
	}
	return nil
}

// Elems is the number of elements, Heads*Tokens*HeadDim, of a valid Desc.
func (d Desc) Elems() int { return d.Heads * d.Tokens * d.HeadDim }

// RawSize is the decoded size in bytes, Elems()*DType.Size(), of a valid Desc.
func (d Desc) RawSize() int { return d.Elems() * d.DType.Size() }

func (d Desc) String() string {
	return fmt.Sprintf("%v %v [%d %d %d]", d.Kind, d.DType, d.Heads, d.Tokens, d.HeadDim)
}

func (d Desc) invalid(msg string, args ...any) error {
	return fmt.Errorf("%w: codec: chunk %v: %s", format.ErrInvalidArgument, d, fmt.Sprintf(msg, args...))
}
