package assemble

import (
	"math"
	"unsafe"

	"github.com/kvstore/kvstore/format"
)

// Pooled layouts: vLLM's caches that keep a layer's K and V in one pool.
//
//	PagedKV      [blocks][2][block_size][kv_heads][head_dim]
//	             K row (h, slot s) of block b at ((2b*bs + s)*kv_heads + h) * row_bytes,
//	             V row one block (bs*kv_heads*row_bytes) later
//	PagedPacked  [blocks][kv_heads][block_size][2*head_dim]
//	             K row (h, s) of block b at ((b*kv_heads + h)*bs + s) * 2*row_bytes,
//	             V row one row (row_bytes) later
//
// Both are strided paged geometry (geom's block, slot and head strides)
// over K[l] = pool[:len-kvOffset] and V[l] = pool[kvOffset:], so the fills
// are the paged ones.

// pooled returns the strides of layout for blocks of bs slots, the bytes
// of one pool block, and the offset of V's rows after K's.
func pooled(layout format.KVLayout, heads, rowBytes, bs int) (block, slot, head, kvOffset int) {
	if layout == format.KVLayoutPagedKV {
		slot, head = heads*rowBytes, rowBytes
		return 2 * bs * slot, slot, head, bs * slot
	}
	slot = 2 * rowBytes
	head = bs * slot
	return heads * head, slot, head, rowBytes
}

// KVOffset is the bytes from a pooled layout's K rows to its V rows (V[l]
// starts that far into the pool); 0 for other layouts.
func KVOffset(m *format.ModelSpec, layout format.KVLayout, blockSize int) int {
	if layout != format.KVLayoutPagedKV && layout != format.KVLayoutPagedPacked {
		return 0
	}
	_, _, _, kv := pooled(layout, m.KVHeads, m.HeadDim*m.DType.Size(), blockSize)
	return kv
}

func (d *Dest) checkPooled(g *geom, bad badFunc) error {
	if d.BlockSize <= 0 || d.BlockSize > math.MaxInt/(2*g.heads*g.rowBytes) {
		return bad("block size %d", d.BlockSize)
	}
	var kv int
	g.bs = d.BlockSize
	g.block, g.slot, g.head, kv = pooled(d.Layout, g.heads, g.rowBytes, d.BlockSize)
	blocks := math.MaxInt
	pools := make([][]byte, len(d.K))
	for l := range d.K {
		k, v := d.K[l], d.V[l]
		if len(k) != len(v) || len(k) == 0 || unsafe.SliceData(v) != (*byte)(unsafe.Add(unsafe.Pointer(unsafe.SliceData(k)), kv)) {
			return bad("layer %d: V is not the layer's pool from byte %d on, with K the pool up to %d bytes before its end", l, kv, kv)
		}
		if pool := len(k) + kv; pool%g.block != 0 {
			return bad("layer %d: pool of %d bytes is not a whole number of %d-byte blocks", l, pool, g.block)
		}
		blocks = min(blocks, (len(k)+kv)/g.block)
		pools[l] = unsafe.Slice(unsafe.SliceData(k), len(k)+kv)
	}
	if err := checkDisjoint(pools); err != nil {
		return bad("two layers' pools overlap")
	}
	return d.checkTable(g, blocks, bad)
}
