package store

import (
	"github.com/kvstore/kvstore/codec"
	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/prune"
	"github.com/kvstore/kvstore/store/internal/packet"
)

// Packet is one document's KV cache as a caller hands it to Put: its
// description (format.PacketDesc: namespace, model, adapter rows, token
// ids, base position, codec) and its tensors.
//
// Rows are tokens: HeaderTokens adapter rows, then one row per TokenIDs
// entry, then TrailerTokens adapter rows; at least one in all. Each layer's
// K and V are [Model.KVHeads][tokens][Model.HeadDim] elements of
// Model.DType, little endian, keys post-RoPE. Put reads the slices and keeps
// no reference to them, so they may be views of anything (a pinned buffer,
// a mapping, a larger tensor). Put rotates keys given at a BasePosition
// other than 0 into its own copy (see store/internal/packet, Normalized),
// and encodes chunks under Codec (see store/internal/packet, Chunk
// codecs).
type Packet struct {
	format.PacketDesc
	// Layers are the tensors, one per model layer.
	Layers []Layer
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

// desc is p as package packet reads it: its fields, and its layers in a
// slice of packet's own (their buffers are shared, not copied).
func (p *Packet) desc() *packet.Desc {
	layers := make([]packet.Layer, len(p.Layers))
	for i, l := range p.Layers {
		layers[i] = packet.Layer(l)
	}
	return &packet.Desc{PacketDesc: p.PacketDesc, Layers: layers, CodecOptions: p.CodecOptions, Keep: p.Keep}
}
