package format

import (
	"fmt"
	"slices"
)

// ChunkKind says whether a chunk holds keys, values, or a pruned packet's
// kept positions. On-disk values; never renumber.
type ChunkKind uint8

const (
	ChunkK ChunkKind = 1
	ChunkV ChunkKind = 2
	// ChunkPositions is the one extra chunk of a pruned packet: its kept
	// local positions as a bitmap, [layers][kv_heads][ceil(tokens/8)]
	// bytes, bit t%8 (LSB first) of byte t/8 set when position t is kept
	// (see PacketHeader.KeptTokens and docs/format.md, "Pruned packets").
	ChunkPositions ChunkKind = 3
)

func (k ChunkKind) String() string {
	switch k {
	case ChunkK:
		return "K"
	case ChunkV:
		return "V"
	case ChunkPositions:
		return "positions"
	}
	return "?"
}

// Codec is how a chunk's bytes are encoded. On-disk values; never renumber.
type Codec uint8

const (
	CodecRaw         Codec = 0 // the tensor's bytes as they are
	CodecShuffleZstd Codec = 1 // byte-shuffle by element size, then zstd
	CodecInt8        Codec = 2 // 8-bit group quantization, KIVI-style (lossy)
	CodecInt4        Codec = 3 // 4-bit group quantization, KIVI-style (lossy)
	CodecLowRank     Codec = 4 // per-head truncated SVD, keys factored pre-RoPE (lossy)
)

// Valid reports whether c is a codec this version knows. The byte layouts
// are in docs/format.md, "Chunk codecs", and package codec.
func (c Codec) Valid() bool { return c <= CodecLowRank }

func (c Codec) String() string {
	switch c {
	case CodecRaw:
		return "raw"
	case CodecShuffleZstd:
		return "shuffle-zstd"
	case CodecInt8:
		return "int8"
	case CodecInt4:
		return "int4"
	case CodecLowRank:
		return "lowrank"
	}
	return fmt.Sprintf("codec(%d)", uint8(c))
}

// ChunkDesc describes one (layer, K|V) chunk of a packet: a tensor of shape
// [kv_heads][rows][head_dim] (rows: Tokens, or KeptTokens when the packet
// is pruned) stored at [Offset, Offset+Length) of a blob file, with the
// CRC32C of those stored bytes. A pruned packet's positions chunk is
// described the same way: Layer = the header's Layers, Kind ChunkPositions,
// DType DTypeU8, Shape PacketHeader.PositionsShape(), always raw.
type ChunkDesc struct {
	Layer     uint32
	Kind      ChunkKind
	DType     DType
	Shape     []uint32 // [kv_heads, rows, head_dim]; positions: [layers, kv_heads, ceil(tokens/8)]
	Codec     Codec
	BlobFile  uint32
	Offset    uint64 // absolute offset in the blob file
	Length    uint64 // stored (encoded) bytes
	RawLength uint64 // decoded bytes: product(Shape) * DType.Size()
	CRC32C    uint32 // of the stored bytes
}

// PacketHeader is everything the catalog keeps about one packet. Its chunks
// are listed layer-major, K before V: chunk 2*l is layer l's K, 2*l+1 its V;
// a pruned packet has one more, chunk 2*Layers, its kept positions.
//
// Tokens counts every KV row: HeaderTokens adapter rows, then the document's
// len(TokenIDs) rows, then TrailerTokens adapter rows. Keys are stored
// post-RoPE at local positions 0..Tokens-1; BasePosition records where the
// caller's keys started before they were normalised to 0.
type PacketHeader struct {
	Version       uint16 // FormatMajor at write time
	Namespace     string
	ID            PacketID
	Model         Fingerprint
	AdapterID     string
	HeaderTokens  uint32
	TrailerTokens uint32
	Tokens        uint32
	TokenIDs      []uint32
	BasePosition  int64
	Layers        uint32
	KVHeads       uint32
	HeadDim       uint32
	DType         DType
	// The extent holding every chunk, trailer included.
	BlobFile      uint32
	ExtentOffset  uint64
	ExtentLength  uint64
	CreatedUnixNs int64
	Chunks        []ChunkDesc
	// KeptTokens is 0 for a whole packet. A pruned packet keeps KeptTokens
	// (1..Tokens) rows per (layer, KV head), a subset of the Tokens rows
	// that differs per head: its K and V chunks are [kv_heads][KeptTokens]
	// [head_dim], keys still post-RoPE at their original local positions,
	// and chunk 2*Layers marks those positions in a bitmap
	// (PositionsShape). The id and TokenIDs are the whole document's.
	KeptTokens uint32
}

// Pruned reports whether the packet keeps only some rows per (layer, KV
// head) (KeptTokens > 0).
func (h *PacketHeader) Pruned() bool { return h.KeptTokens > 0 }

// Rows is the number of rows stored per (layer, KV head): KeptTokens for a
// pruned packet, Tokens otherwise.
func (h *PacketHeader) Rows() uint32 {
	if h.Pruned() {
		return h.KeptTokens
	}
	return h.Tokens
}

// PositionsChunk is the index of a pruned packet's positions chunk,
// 2*Layers; only meaningful when Pruned.
func (h *PacketHeader) PositionsChunk() int { return 2 * int(h.Layers) }

// PositionsRowBytes is the bytes of one (layer, KV head) row of a pruned
// packet's positions bitmap: ceil(Tokens/8), bit t%8 (least significant
// first) of byte t/8 set when local position t is kept, the bits at and
// beyond Tokens zero.
func (h *PacketHeader) PositionsRowBytes() uint32 { return uint32((uint64(h.Tokens) + 7) / 8) }

// PositionsShape is the shape of a pruned packet's positions chunk,
// [Layers, KVHeads, PositionsRowBytes()] of dtype DTypeU8.
func (h *PacketHeader) PositionsShape() []uint32 {
	return []uint32{h.Layers, h.KVHeads, h.PositionsRowBytes()}
}

// Moved returns a copy of h whose extent starts at off of blob file num,
// every chunk moved with it (compaction's copy, reconciliation's record of
// an extent found at a new place). h is not changed.
func (h *PacketHeader) Moved(num uint32, off uint64) *PacketHeader {
	n := *h
	n.Chunks = slices.Clone(h.Chunks)
	for i := range n.Chunks {
		n.Chunks[i].BlobFile = num
		n.Chunks[i].Offset = n.Chunks[i].Offset - h.ExtentOffset + off
	}
	n.BlobFile, n.ExtentOffset = num, off
	return &n
}
