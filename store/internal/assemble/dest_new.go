package assemble

import (
	"fmt"
	"math"

	"github.com/kvstore/kvstore/format"
)

// Shape is a destination's layout and, for the paged layouts, how many
// tokens a block holds.
type Shape struct {
	Layout    format.KVLayout
	BlockSize int // paged layouts only; must be 0 for the others
}

// paged reports whether layout places tokens through a block table.
func paged(layout format.KVLayout) bool {
	return layout == format.KVLayoutPagedNHD || layout == format.KVLayoutPagedKV || layout == format.KVLayoutPagedPacked
}

// New allocates a destination of shape s for tokens rows of model m:
// buffers of exactly the layout's size for the unpaged layouts; for the
// paged ones ceil(tokens/BlockSize) blocks per layer (two buffers, or one
// pool holding K and V) and the block table 0, 1, .... A shape or size
// that does not fit is ErrInvalidArgument.
func New(m *format.ModelSpec, tokens int, s Shape) (*Dest, error) {
	rb := m.HeadDim * m.DType.Size()
	if tokens < 0 || m.Layers <= 0 || m.KVHeads <= 0 || rb <= 0 {
		return nil, fmt.Errorf("%w: assemble: destination for %d tokens of %d layers x %d kv heads x %d-byte rows", ErrInvalidArgument, tokens, m.Layers, m.KVHeads, rb)
	}
	if !paged(s.Layout) {
		if s.BlockSize != 0 {
			return nil, fmt.Errorf("%w: assemble: %v destination with block size %d", ErrInvalidArgument, s.Layout, s.BlockSize)
		}
		if s.Layout != format.KVLayoutHND && s.Layout != format.KVLayoutTransposedV {
			return nil, fmt.Errorf("%w: assemble: unknown layout %v", ErrInvalidArgument, s.Layout)
		}
		if tokens > math.MaxInt/(m.KVHeads*rb) {
			return nil, fmt.Errorf("%w: assemble: %d tokens overflow", ErrInvalidArgument, tokens)
		}
		return alloc(s.Layout, m.Layers, m.KVHeads*tokens*rb), nil
	}
	block := s.BlockSize * m.KVHeads * rb // one K (or V) block
	if s.BlockSize <= 0 || s.BlockSize > math.MaxInt/(2*m.KVHeads*rb) {
		return nil, fmt.Errorf("%w: assemble: %v destination with block size %d", ErrInvalidArgument, s.Layout, s.BlockSize)
	}
	blocks := (tokens + s.BlockSize - 1) / s.BlockSize
	if blocks > math.MaxInt32 || blocks > math.MaxInt/(2*block) {
		return nil, fmt.Errorf("%w: assemble: %d blocks overflow", ErrInvalidArgument, blocks)
	}
	table := make([]int32, blocks)
	for i := range table {
		table[i] = int32(i)
	}
	if s.Layout == format.KVLayoutPagedNHD {
		d := alloc(s.Layout, m.Layers, blocks*block)
		d.BlockSize, d.BlockTable = s.BlockSize, table
		return d, nil
	}
	pools := make([][]byte, m.Layers)
	for l := range pools {
		pools[l] = make([]byte, 2*blocks*block)
	}
	return NewPooled(m, s.Layout, pools, s.BlockSize, table)
}

// alloc is a destination of layers K and V buffers of n bytes each.
func alloc(layout format.KVLayout, layers, n int) *Dest {
	d := &Dest{Layout: layout, K: make([][]byte, layers), V: make([][]byte, layers)}
	for l := range layers {
		d.K[l], d.V[l] = make([]byte, n), make([]byte, n)
	}
	return d
}

// NewPooled is a destination over a server's pools, one per layer, in one
// of vLLM's pooled layouts (format.KVLayoutPagedKV or
// format.KVLayoutPagedPacked): K[l] and V[l] are pools[l]'s K and V views
// (KVOffset apart). The pools are the caller's; table maps the
// assembly's token t to block table[t/blockSize]. Run checks the rest.
func NewPooled(m *format.ModelSpec, layout format.KVLayout, pools [][]byte, blockSize int, table []int32) (*Dest, error) {
	if layout != format.KVLayoutPagedKV && layout != format.KVLayoutPagedPacked {
		return nil, fmt.Errorf("%w: assemble: %v is not a pooled layout", ErrInvalidArgument, layout)
	}
	if blockSize <= 0 || blockSize > math.MaxInt/(2*m.KVHeads*m.HeadDim*m.DType.Size()) {
		return nil, fmt.Errorf("%w: assemble: %v destination with block size %d", ErrInvalidArgument, layout, blockSize)
	}
	kv := KVOffset(m, layout, blockSize)
	d := &Dest{Layout: layout, K: make([][]byte, len(pools)), V: make([][]byte, len(pools)), BlockSize: blockSize, BlockTable: table}
	for l, p := range pools {
		if len(p) <= kv {
			return nil, fmt.Errorf("%w: assemble: %v pool of layer %d holds %d bytes, under one block", ErrInvalidArgument, layout, l, len(p))
		}
		d.K[l], d.V[l] = p[:len(p)-kv:len(p)-kv], p[kv:]
	}
	return d, nil
}

// NewContiguous allocates a contiguous (HND) destination for tokens rows
// of model m, each buffer exactly kv_heads*tokens*head_dim elements.
func NewContiguous(m *format.ModelSpec, tokens int) *Dest {
	n := m.KVHeads * tokens * m.HeadDim * m.DType.Size()
	d := &Dest{Layout: format.KVLayoutHND, K: make([][]byte, m.Layers), V: make([][]byte, m.Layers)}
	for l := range m.Layers {
		d.K[l], d.V[l] = make([]byte, n), make([]byte, n)
	}
	return d
}
