package store

import (
	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store/internal/assemble"
)

// Layout says how a Dest arranges the rows of one layer's K (or V) buffer:
// format.KVLayout, the one layout type the store, the GPU staging layer and
// its kernels share, documented by go doc of package format. A row is one
// token's head_dim elements for one KV head.
type Layout = format.KVLayout

const (
	// LayoutContiguous is [kv_heads][tokens][head_dim], tokens being
	// Assembly.Tokens(): head 0's rows of every packet in item order, then
	// head 1's, and so on (HF's HND cache layout, and kvstore's own).
	LayoutContiguous = format.KVLayoutHND
	// LayoutPaged is [blocks][block_size][kv_heads][head_dim] (vLLM's NHD
	// paged layout): token t of the assembly lives in block
	// BlockTable[t/BlockSize], slot t%BlockSize.
	LayoutPaged = format.KVLayoutPagedNHD
	// LayoutTransposedV is llama.cpp's KV cache state with v_trans = 1: K
	// token-major [tokens][kv_heads][head_dim] (LayoutPaged with one block
	// of tokens slots), V transposed [kv_heads*head_dim][tokens], element
	// (h, t, d) at (h*head_dim+d)*tokens + t. Each buffer is exactly
	// kv_heads*tokens*head_dim elements.
	LayoutTransposedV = format.KVLayoutTransposedV
	// LayoutPagedKV is vLLM's paged cache with a block's K and V side by
	// side in one pool per layer, [blocks][2][block_size][kv_heads][head_dim]
	// (NewPooledDest builds its Dest over a server's pools).
	LayoutPagedKV = format.KVLayoutPagedKV
	// LayoutPagedPacked is vLLM's packed paged cache,
	// [blocks][kv_heads][block_size][2*head_dim]: a slot's K row, then its
	// V row, head-major within a block (NewPooledDest).
	LayoutPagedPacked = format.KVLayoutPagedPacked
)

// Dest is caller-owned memory that Assemble fills: K[l] and V[l] are layer
// l's keys and values in the model's storage dtype, little endian.
//
// Contiguous: each buffer is exactly kv_heads*tokens*head_dim elements.
// Paged: each buffer is a whole number of blocks of
// BlockSize*kv_heads*head_dim elements (the pool of one layer), BlockTable
// has at least ceil(tokens/BlockSize) entries, and those entries are
// distinct blocks present in every buffer. Slots of a block past the last
// token, and blocks the table does not name, are not written. Transposed V:
// each buffer is exactly kv_heads*tokens*head_dim elements. Pooled
// (LayoutPagedKV, LayoutPagedPacked): K[l] and V[l] are views of layer l's
// one pool of whole blocks, as NewPooledDest makes them, and BlockTable is
// as for Paged.
//
// No two buffers may overlap, but a pooled layer's K and V. Assemble
// checks all of this up front and writes nothing when a check fails
// (ErrInvalidArgument). store/internal/assemble's package comment draws
// each layout.
type Dest struct {
	// Layout is how each buffer arranges its rows.
	Layout Layout
	// K[l] and V[l] are layer l's key and value buffers.
	K, V [][]byte
	// BlockSize is the tokens per block of the paged and pooled layouts;
	// 0 for the others.
	BlockSize int
	// BlockTable maps the assembly's token t to block
	// BlockTable[t/BlockSize] of the paged and pooled layouts; nil for
	// the others.
	BlockTable []int32
}

// fromDest is assemble's destination as the store's (the same fields,
// the same memory); nil stays nil.
func fromDest(d *assemble.Dest) *Dest { return (*Dest)(d) }

// toDest is d as assemble's, which fills it.
func toDest(d *Dest) *assemble.Dest { return (*assemble.Dest)(d) }

// NewContiguousDest allocates a contiguous Dest for tokens rows of model m.
func NewContiguousDest(m *format.ModelSpec, tokens int) *Dest {
	return fromDest(assemble.NewContiguous(m, tokens))
}

// DestShape is a destination's Layout and, for the paged layouts
// (LayoutPaged, LayoutPagedKV, LayoutPagedPacked), the tokens per block.
type DestShape struct {
	// Layout is the destination's layout.
	Layout Layout
	// BlockSize is the tokens a block holds: the paged layouts only, 0
	// for the others.
	BlockSize int
}

// NewDest allocates a Dest of shape s for tokens rows of model m, in any
// layout: the unpaged ones exactly sized, the paged ones with
// ceil(tokens/BlockSize) blocks per layer and the block table 0, 1, ....
// A shape that does not fit is ErrInvalidArgument.
func NewDest(m *format.ModelSpec, tokens int, s DestShape) (*Dest, error) {
	d, err := assemble.New(m, tokens, assemble.Shape(s))
	return fromDest(d), err
}

// NewPooledDest is a Dest over a server's own pools, one per layer, in
// LayoutPagedKV or LayoutPagedPacked: K[l] and V[l] become pools[l]'s K
// and V views; table maps the assembly's token t to block
// table[t/blockSize]. Assemble checks the pools' size and the table.
func NewPooledDest(m *format.ModelSpec, layout Layout, pools [][]byte, blockSize int, table []int32) (*Dest, error) {
	d, err := assemble.NewPooled(m, layout, pools, blockSize, table)
	return fromDest(d), err
}
