package packet

import (
	"fmt"
	"math"

	"github.com/kvstore/kvstore/codec"
	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/prune"
)

// Desc is a packet as the store's Packet describes it (its fields and
// their doc are format.PacketDesc's and store.Packet's), plus what
// compaction adds. Its buffers are only read.
type Desc struct {
	format.PacketDesc
	Layers       []Layer
	CodecOptions codec.Options
	Keep         *prune.Set

	Kept      int    // > 0: Layers hold only the kept rows (Compacted)
	Positions []byte // the positions chunk when Kept > 0
}

// Layer is one layer's keys and values.
type Layer struct{ K, V []byte }

// Rows is the rows per (layer, KV head) that Layers hold: the kept rows of
// a compacted packet, else Tokens.
func (d *Desc) Rows() int {
	if d.Kept > 0 {
		return d.Kept
	}
	return d.Tokens()
}

// Chunks is the number of chunks the packet is stored in: K and V per
// layer, and a compacted packet's positions chunk.
func (d *Desc) Chunks() int {
	if d.Kept > 0 {
		return 2*len(d.Layers) + 1
	}
	return 2 * len(d.Layers)
}

// Chunk returns the bytes of chunk i: layer i/2, K if i is even; a
// compacted packet's chunk 2*layers is its positions.
func (d *Desc) Chunk(i int) []byte {
	if i == 2*len(d.Layers) {
		return d.Positions
	}
	if i%2 == 0 {
		return d.Layers[i/2].K
	}
	return d.Layers[i/2].V
}

// Check validates d (its keep-set included) and returns the length in
// bytes of each of its K|V chunks as stored: of the kept rows when it is
// stored pruned. Its errors wrap ErrInvalidArgument, or the spec's.
func (d *Desc) Check() (uint64, error) {
	bad := func(f string, args ...any) error {
		return fmt.Errorf("%w: packet: %s", ErrInvalidArgument, fmt.Sprintf(f, args...))
	}
	if d.Model == nil {
		return 0, bad("no model spec")
	}
	if err := d.Model.Validate(); err != nil {
		return 0, fmt.Errorf("packet: %w", err)
	}
	if err := format.CheckNamespace(d.Namespace); err != nil {
		return 0, err
	}
	switch {
	case len(d.AdapterID) > format.MaxNameLen:
		return 0, bad("adapter id of %d bytes exceeds %d", len(d.AdapterID), format.MaxNameLen)
	case d.HeaderTokens < 0 || d.TrailerTokens < 0:
		return 0, bad("negative adapter token count (%d header, %d trailer)", d.HeaderTokens, d.TrailerTokens)
	case uint64(d.HeaderTokens) > math.MaxUint32 || uint64(d.TrailerTokens) > math.MaxUint32 || uint64(len(d.TokenIDs)) > math.MaxUint32:
		return 0, bad("more than %d tokens", uint32(math.MaxUint32))
	}
	tokens := uint64(d.HeaderTokens) + uint64(len(d.TokenIDs)) + uint64(d.TrailerTokens)
	switch {
	case tokens == 0:
		return 0, bad("no tokens: a packet holds at least one KV row")
	case tokens > math.MaxUint32:
		return 0, bad("%d tokens exceed %d", tokens, uint32(math.MaxUint32))
	case len(d.Layers) != d.Model.Layers:
		return 0, bad("%d layers, model has %d", len(d.Layers), d.Model.Layers)
	}
	if err := checkBasePosition(d.BasePosition); err != nil {
		return 0, err
	}
	if err := d.checkCodec(); err != nil {
		return 0, err
	}
	// Bounded by the spec's limits: < 2^10 * 2^32 * 2^12 * 2^2.
	n := uint64(d.Model.KVHeads) * tokens * uint64(d.Model.HeadDim) * uint64(d.Model.DType.Size())
	for l, layer := range d.Layers {
		if uint64(len(layer.K)) != n || uint64(len(layer.V)) != n {
			return 0, bad("layer %d: K %d bytes, V %d bytes, want %d ([%d][%d][%d] %v)",
				l, len(layer.K), len(layer.V), n, d.Model.KVHeads, tokens, d.Model.HeadDim, d.Model.DType)
		}
	}
	k, err := d.KeptRows()
	if err != nil || k == int(tokens) {
		return n, err
	}
	return n / tokens * uint64(k), nil
}

// checkBasePosition accepts the base position of a packet's keys: any
// position >= 0. Keys are stored at local positions 0..n-1, so Put rotates
// keys given at another base by -base before storing them (Normalized);
// the header still records the base.
func checkBasePosition(base int) error {
	if base < 0 {
		return fmt.Errorf("%w: packet: negative base position %d", ErrInvalidArgument, base)
	}
	return nil
}
