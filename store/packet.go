package store

import (
	"fmt"
	"math"

	"github.com/kvstore/kvstore/codec"
	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/prune"
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
	// base by -BasePosition first, into its own copy (see checkBasePosition).
	BasePosition int
	Layers       []Layer
	// Codec is how Put stores each chunk (see store/codec.go): raw (the
	// zero value), shuffle-zstd (lossless), int8 or int4 (lossy group
	// quantization of keys as stored: post-RoPE at local positions), or
	// low rank (lossy truncated SVD per KV head, keys un-rotated first
	// with the model's RoPE). A chunk that the codec would not make
	// smaller is stored raw; the header records each chunk's codec.
	Codec format.Codec
	// CodecOptions are the codec's settings (group size, scale dtype, zstd
	// level, rank); the zero value means codec's defaults. Put sets RoPE
	// to Model's, the rotation the keys are stored with.
	CodecOptions codec.Options
	// Keep, when not nil, stores the packet pruned (see pruned.go): only
	// the rows it keeps, k per (layer, KV head) (the same k for every
	// head), and their local positions. Layers still hold every row; Put
	// gathers the kept ones. A set keeping every row stores the packet
	// whole. The id is the whole document's, so a pruned and a whole
	// variant of one document share it: whichever is stored first stays.
	Keep *prune.Set

	kept      int    // > 0: Layers hold only the kept rows (compacted)
	positions []byte // the positions chunk when kept > 0
}

// Layer is one layer's keys and values.
type Layer struct{ K, V []byte }

// Tokens is the number of KV rows: HeaderTokens + len(TokenIDs) + TrailerTokens.
func (p *Packet) Tokens() int { return p.HeaderTokens + len(p.TokenIDs) + p.TrailerTokens }

// rows is the rows per (layer, KV head) that Layers hold: the kept rows of
// a compacted packet, else Tokens.
func (p *Packet) rows() int {
	if p.kept > 0 {
		return p.kept
	}
	return p.Tokens()
}

// chunks is the number of chunks the packet is stored in: K and V per
// layer, and a compacted packet's positions chunk.
func (p *Packet) chunks() int {
	if p.kept > 0 {
		return 2*len(p.Layers) + 1
	}
	return 2 * len(p.Layers)
}

// check validates p (its keep-set included) and returns the length in
// bytes of each of its K|V chunks as stored: of the kept rows when it is
// stored pruned.
func (p *Packet) check() (uint64, error) {
	bad := func(f string, args ...any) error {
		return fmt.Errorf("%w: packet: %s", ErrInvalidArgument, fmt.Sprintf(f, args...))
	}
	if p.Model == nil {
		return 0, bad("no model spec")
	}
	if err := p.Model.Validate(); err != nil {
		return 0, fmt.Errorf("packet: %w", err)
	}
	if err := checkNamespace(p.Namespace); err != nil {
		return 0, err
	}
	switch {
	case len(p.AdapterID) > format.MaxNameLen:
		return 0, bad("adapter id of %d bytes exceeds %d", len(p.AdapterID), format.MaxNameLen)
	case p.HeaderTokens < 0 || p.TrailerTokens < 0:
		return 0, bad("negative adapter token count (%d header, %d trailer)", p.HeaderTokens, p.TrailerTokens)
	case uint64(p.HeaderTokens) > math.MaxUint32 || uint64(p.TrailerTokens) > math.MaxUint32 || uint64(len(p.TokenIDs)) > math.MaxUint32:
		return 0, bad("more than %d tokens", uint32(math.MaxUint32))
	}
	tokens := uint64(p.HeaderTokens) + uint64(len(p.TokenIDs)) + uint64(p.TrailerTokens)
	switch {
	case tokens == 0:
		return 0, bad("no tokens: a packet holds at least one KV row")
	case tokens > math.MaxUint32:
		return 0, bad("%d tokens exceed %d", tokens, uint32(math.MaxUint32))
	case len(p.Layers) != p.Model.Layers:
		return 0, bad("%d layers, model has %d", len(p.Layers), p.Model.Layers)
	}
	if err := checkBasePosition(p.BasePosition); err != nil {
		return 0, err
	}
	if err := p.checkCodec(); err != nil {
		return 0, err
	}
	// Bounded by the spec's limits: < 2^10 * 2^32 * 2^12 * 2^2.
	n := uint64(p.Model.KVHeads) * tokens * uint64(p.Model.HeadDim) * uint64(p.Model.DType.Size())
	for l, layer := range p.Layers {
		if uint64(len(layer.K)) != n || uint64(len(layer.V)) != n {
			return 0, bad("layer %d: K %d bytes, V %d bytes, want %d ([%d][%d][%d] %v)",
				l, len(layer.K), len(layer.V), n, p.Model.KVHeads, tokens, p.Model.HeadDim, p.Model.DType)
		}
	}
	k, err := p.keptRows()
	if err != nil || k == int(tokens) {
		return n, err
	}
	return n / tokens * uint64(k), nil
}

// checkBasePosition accepts the base position of a packet's keys: any
// position >= 0. Keys are stored at local positions 0..n-1, so Put rotates
// keys given at another base by -base before storing them (normalized, in
// normalize.go); the header still records the base.
func checkBasePosition(base int) error {
	if base < 0 {
		return fmt.Errorf("%w: packet: negative base position %d", ErrInvalidArgument, base)
	}
	return nil
}

// chunkSource returns the bytes of chunk i: layer i/2, K if i is even; a
// compacted packet's chunk 2*layers is its positions.
func (p *Packet) chunkSource(i int) []byte {
	if i == 2*len(p.Layers) {
		return p.positions
	}
	if i%2 == 0 {
		return p.Layers[i/2].K
	}
	return p.Layers[i/2].V
}
