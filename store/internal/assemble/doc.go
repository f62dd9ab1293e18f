// Package assemble is KV Packet's recompute-free read as data: given the
// stored packets of an assembly as already opened chunk sources (Source:
// the store's views, each verifying its chunks against their CRC32C), it
// places their rows, in item order, into a caller's destination (Dest),
// re-rotating each packet's keys by its item's Offset (reconstruct.Shifter)
// and copying its values unchanged. Prepare checks the packets against the
// model spec and decides which rows each places (a keep-set, or the rows a
// pruned packet stored); Assembly.Run fills a destination on a pool of
// workers and reports each layer as soon as it is complete.
//
// It knows nothing of the store: the store looks the packets up through
// Open's callbacks (Held holds the views it returns and releases them),
// and keeps the public names (store.Dest has this package's Dest's fields
// and converts to it).
//
// # Destination layouts
//
// Dest is memory, not bytes on disk; each layer's K (and V) buffer is one
// of format.KVLayout's arrangements of rows (a row: one token's head_dim
// elements of one KV head, in the model's dtype):
//
//	HND (contiguous)   [kv_heads][tokens][head_dim]
//	                   row (h, t) at (h*tokens + t) * row_bytes
//	PagedNHD           [blocks][block_size][kv_heads][head_dim]
//	                   row (h, t) at ((table[t/bs]*bs + t%bs)*kv_heads + h) * row_bytes
//	TransposedV        K as one block of tokens slots: [tokens][kv_heads][head_dim];
//	                   V [kv_heads*head_dim][tokens]: element (h, t, d) at
//	                   (h*head_dim + d)*tokens + t
//
// vLLM's two paged caches are PagedNHD with strides (NewVLLM, NewVLLMPacked):
// a layer's K and V are views into one [blocks][2][block_size][kv_heads][head_dim]
// pool, or into one [blocks][kv_heads][block_size][2*head_dim] pool; see
// dest_vllm.go.
//
// # Sources
//
// A stored chunk is [kv_heads][rows][head_dim]: chunk 2l is layer l's keys,
// 2l+1 its values, as format.PacketHeader describes. A raw chunk is read in
// place when Source.Raw returns its mapped bytes, and checked against its
// CRC32C in the same pass that places its rows; otherwise (no mapping, or
// a source that would rather be read: the store's first read of a chunk
// after Open, and a small packet's every read) it streams through a
// bounded scratch kept between runs (Source.ReadAt), its CRC computed on
// the way. A
// compressed chunk, or one placed through a keep-set, is verified and
// decoded whole (Source.Decode, Source.Chunk).
//
// # Stores
//
// A run that writes 64 MiB or more (streamMin) stores the raw rows it
// copies or rotates from a mapping with non-temporal hints
// (rowcopy.Stream, reconstruct.Shifter.StreamRows), which skip the read
// for ownership of each destination line, and fences once per chunk before
// the chunk is counted; smaller runs store through the cache, so that the
// destination stays cached for its reader. Paged placement prefetches
// each token's rows a few tokens ahead (rowcopy.Prefetch): they lie in as
// many places as there are heads.
package assemble

import "github.com/kvstore/kvstore/format"

// The errors are format's, so that errors.Is works with the store's names
// for them too.
var (
	ErrInvalidArgument = format.ErrInvalidArgument
	ErrCorruption      = format.ErrCorruption
)
