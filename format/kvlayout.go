package format

import "fmt"

// KVLayout is the shape of one layer's K (or V) buffer in a server's KV
// cache: the one layout type that store.Assemble's destinations, the GPU
// staging layer and its kernels share (store.Layout and gpu.LayoutKind are
// this type). A row is one token's head_dim elements for one KV head. The
// numeric values are part of the kernels' parameter block (KVS_HND,
// KVS_PAGED_NHD in gpu/kernels/common.cuh); 0 is no layout.
type KVLayout uint8

const (
	// KVLayoutHND is one contiguous tensor per layer and K|V, HF's cache
	// layout and kvstore's own:
	//
	//	[kv_heads][tokens][head_dim]    element (h, t, d) at (h*tokens + t)*head_dim + d
	KVLayoutHND KVLayout = 1
	// KVLayoutPagedNHD is vLLM's paged cache: blocks of block_size tokens and
	// a block table of int32 ids mapping token t to block table[t/bs], slot
	// t%bs:
	//
	//	[blocks][block_size][kv_heads][head_dim]
	KVLayoutPagedNHD KVLayout = 2
	// KVLayoutTransposedV is llama.cpp's cache state with v_trans = 1: K
	// token-major [tokens][kv_heads][head_dim], V transposed
	// [kv_heads*head_dim][tokens], element (h, t, d) at
	// (h*head_dim + d)*tokens + t. The GPU kernels do not write it.
	KVLayoutTransposedV KVLayout = 3
	// KVLayoutPagedKV is vLLM's paged cache with K and V of a block side
	// by side in one pool per layer (FlashInfer's NHD kv_cache):
	//
	//	[blocks][2][block_size][kv_heads][head_dim]    K at [b][0], V at [b][1]
	//
	// It is KVLayoutPagedNHD with a block stride of two blocks, V one
	// block after K. The GPU kernels do not write it.
	KVLayoutPagedKV KVLayout = 4
	// KVLayoutPagedPacked is vLLM's packed paged cache: heads before
	// slots within a block, and a slot's K and V rows side by side:
	//
	//	[blocks][kv_heads][block_size][2*head_dim]    K at [b][h][s][:hd], V at [b][h][s][hd:]
	//
	// The GPU kernels do not write it.
	KVLayoutPagedPacked KVLayout = 5
)

func (l KVLayout) String() string {
	switch l {
	case KVLayoutHND:
		return "hnd"
	case KVLayoutPagedNHD:
		return "paged-nhd"
	case KVLayoutTransposedV:
		return "transposed-v"
	case KVLayoutPagedKV:
		return "paged-kv"
	case KVLayoutPagedPacked:
		return "paged-packed"
	}
	return fmt.Sprintf("layout(%d)", uint8(l))
}
