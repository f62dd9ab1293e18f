package store

import (
	"github.com/kvstore/kvstore/codec"
	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/prune"
	"github.com/kvstore/kvstore/store/internal/packet"
)

// Packet is one document's KV cache as a caller hands it to Put.
//
// Rows are tokens: HeaderTokens adapter rows, then one row per TokenIDs
// entry, then TrailerTokens adapter rows; at least one in all. Each layer's
// K and V are [Model.KVHeads][tokens][Model.HeadDim] elements of
// Model.DType, little endian, keys post-RoPE. Put reads the slices and keeps
// no reference to them, so they may be views of anything (a pinned buffer,
// a mapping, a larger tensor).
type Packet struct {
	Namespace     string
	Model         *format.ModelSpec
	AdapterID     string
	HeaderTokens  int
	TrailerTokens int
	TokenIDs      []uint32
	// BasePosition (>= 0) is the position of the keys' first row. Keys are
	// stored at positions 0..tokens-1: Put rotates keys given at another
	// base by -BasePosition first, into its own copy (see
	// store/internal/packet, Normalized).
	BasePosition int
	Layers       []Layer
	// Codec is how Put stores each chunk (see store/internal/packet, Chunk
	// codecs): raw (the zero value), shuffle-zstd (lossless), int8 or int4 (lossy group
	// quantization of keys as stored: post-RoPE at local positions), or
	// low rank (lossy truncated SVD per KV head, keys un-rotated first
	// with the model's RoPE). A chunk that the codec would not make
	// smaller is stored raw; the header records each chunk's codec.
	Codec format.Codec
	// CodecOptions are the codec's settings (group size, scale dtype, zstd
	// level, rank); the zero value means codec's defaults. Put sets RoPE
	// to Model's, the rotation the keys are stored with.
	CodecOptions codec.Options
	// Keep, when not nil, stores the packet pruned (see
	// store/internal/packet, Pruned packets): only the rows it keeps, k per (layer, KV head) (the same k for every
	// head), and their local positions. Layers still hold every row; Put
	// gathers the kept ones. A set keeping every row stores the packet
	// whole. The id is the whole document's, so a pruned and a whole
	// variant of one document share it: whichever is stored first stays.
	Keep *prune.Set
}

// Layer is one layer's keys and values.
type Layer struct{ K, V []byte }

// Tokens is the number of KV rows: HeaderTokens + len(TokenIDs) + TrailerTokens.
func (p *Packet) Tokens() int { return p.HeaderTokens + len(p.TokenIDs) + p.TrailerTokens }

// desc is p as package packet reads it: its fields, and its layers in a
// slice of packet's own (their buffers are shared, not copied).
func (p *Packet) desc() *packet.Desc {
	layers := make([]packet.Layer, len(p.Layers))
	for i, l := range p.Layers {
		layers[i] = packet.Layer(l)
	}
	return &packet.Desc{
		Namespace: p.Namespace, Model: p.Model, AdapterID: p.AdapterID,
		HeaderTokens: p.HeaderTokens, TrailerTokens: p.TrailerTokens, TokenIDs: p.TokenIDs,
		BasePosition: p.BasePosition, Layers: layers,
		Codec: p.Codec, CodecOptions: p.CodecOptions, Keep: p.Keep,
	}
}
