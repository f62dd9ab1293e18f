package gpu

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/kvstore/kvstore/format"
)

// LayoutKind is the shape of the server's KV buffer that the kernels write:
// format.KVLayout, the layout type store.Assemble's destinations use too.
type LayoutKind = format.KVLayout

const (
	// LayoutHND is one contiguous tensor per layer and K|V:
	//
	//	[heads][tokens][head_dim]    element (h, t, d) at (h*Tokens + t)*HeadDim + d
	LayoutHND = format.KVLayoutHND
	// LayoutPagedNHD is a paged cache (vLLM style): physical blocks of
	// BlockSize tokens, and a block table of int32 block ids that maps
	// logical token t to block table[t/BlockSize], slot t%BlockSize:
	//
	//	[blocks][block_size][heads][head_dim]
	//	element (h, t, d) at ((table[t/BS]*BS + t%BS)*Heads + h)*HeadDim + d
	LayoutPagedNHD = format.KVLayoutPagedNHD
)

// Layout describes the destination of a kernel: one layer's K or V in the
// server's KV buffer. Its data lives in a Buffer of Bytes() bytes and, for
// the paged kind, its block table in a Buffer of TableLen() int32 ids
// (little endian).
type Layout struct {
	Kind    LayoutKind
	DType   format.DType // f32, f16 or bf16; rounding is to nearest even
	Heads   int
	HeadDim int
	// Tokens is the number of logical tokens addressable: the tensor's
	// token dimension for HND, TableLen()*BlockSize for the paged kind.
	Tokens int
	// BlockSize and Blocks (physical blocks in the data buffer) are for
	// the paged kind only.
	BlockSize int
	Blocks    int
}

// maxLayoutElems bounds a layout so that every element index fits in int32
// as well as in the kernels' 64-bit arithmetic with room to spare.
const maxLayoutElems = 1 << 40

// Validate checks that l describes a layout the kernels can address.
func (l *Layout) Validate() error {
	bad := func(f string, a ...any) error {
		return fmt.Errorf("%w: layout: %s", ErrInvalidArgument, fmt.Sprintf(f, a...))
	}
	switch {
	case !l.DType.Float():
		return bad("dtype %v is not f32, f16 or bf16", l.DType)
	case l.Heads <= 0 || l.Heads > format.MaxKVHeads:
		return bad("heads %d not in [1, %d]", l.Heads, format.MaxKVHeads)
	case l.HeadDim <= 0 || l.HeadDim > format.MaxHeadDim:
		return bad("head dim %d not in [1, %d]", l.HeadDim, format.MaxHeadDim)
	case l.Tokens < 0 || l.Tokens > math.MaxInt32:
		return bad("tokens %d not in [0, 2^31)", l.Tokens)
	}
	switch l.Kind {
	case LayoutHND:
		if l.BlockSize != 0 || l.Blocks != 0 {
			return bad("hnd layout with block size %d, blocks %d", l.BlockSize, l.Blocks)
		}
		if l.elems(l.Tokens) > maxLayoutElems {
			return bad("%d x %d x %d elements is too many", l.Heads, l.Tokens, l.HeadDim)
		}
	case LayoutPagedNHD:
		if l.BlockSize <= 0 || l.BlockSize > math.MaxInt32 || l.Blocks < 0 || l.Blocks > math.MaxInt32 {
			return bad("paged layout with block size %d, blocks %d", l.BlockSize, l.Blocks)
		}
		if l.Tokens%l.BlockSize != 0 {
			return bad("paged layout: tokens %d not a multiple of block size %d", l.Tokens, l.BlockSize)
		}
		if int64(l.Blocks)*int64(l.BlockSize) > maxLayoutElems || l.elems(l.Blocks*l.BlockSize) > maxLayoutElems {
			return bad("%d blocks of %d tokens is too many elements", l.Blocks, l.BlockSize)
		}
	default:
		return bad("unknown kind %v", l.Kind)
	}
	return nil
}

func (l *Layout) elems(tokens int) int64 { return int64(l.Heads) * int64(tokens) * int64(l.HeadDim) }

// Bytes is the size of the layout's data buffer.
func (l *Layout) Bytes() int {
	if l.Kind == LayoutPagedNHD {
		return int(l.elems(l.Blocks*l.BlockSize)) * l.DType.Size()
	}
	return int(l.elems(l.Tokens)) * l.DType.Size()
}

// TableLen is the number of block ids in the paged kind's table, 0 for HND.
func (l *Layout) TableLen() int {
	if l.Kind != LayoutPagedNHD {
		return 0
	}
	return l.Tokens / l.BlockSize
}

// Row returns the element index of (head, token, 0) in the data buffer;
// the head's HeadDim elements follow it. table is the paged kind's block
// table. It fails for a token out of range or a block id out of range,
// which is how the kernels treat them too (they write nothing there).
func (l *Layout) Row(head, token int, table []int32) (int, error) {
	if head < 0 || head >= l.Heads || token < 0 || token >= l.Tokens {
		return 0, fmt.Errorf("%w: layout: (head %d, token %d) outside %d heads x %d tokens", ErrInvalidArgument, head, token, l.Heads, l.Tokens)
	}
	if l.Kind == LayoutHND {
		return (head*l.Tokens + token) * l.HeadDim, nil
	}
	blk := table[token/l.BlockSize]
	if blk < 0 || int(blk) >= l.Blocks {
		return 0, fmt.Errorf("%w: layout: block table entry %d of token %d is %d, not in [0, %d)", ErrInvalidArgument, token/l.BlockSize, token, blk, l.Blocks)
	}
	slot := int(blk)*l.BlockSize + token%l.BlockSize
	return (slot*l.Heads + head) * l.HeadDim, nil
}

// EncodeTable writes a block table as the little-endian int32 bytes the
// kernels read.
func EncodeTable(table []int32) []byte {
	b := make([]byte, 4*len(table))
	for i, v := range table {
		binary.LittleEndian.PutUint32(b[4*i:], uint32(v))
	}
	return b
}

// decodeTable reads a block table back.
func decodeTable(b []byte) []int32 {
	t := make([]int32, len(b)/4)
	for i := range t {
		t[i] = int32(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return t
}
