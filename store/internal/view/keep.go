package view

import (
	"fmt"
	"math"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/prune"
)

// DecodePositions reads the positions chunk b of pruned packet h (its
// length checked by the header's validation, its CRC by the caller) and
// checks every (layer, KV head) bitmap: exactly h.KeptTokens bits set, none
// at or beyond h.Tokens. Anything else is ErrCorruption. The lists of the
// set returned are increasing, as the bits are read in position order.
func DecodePositions(h *format.PacketHeader, b []byte) (*prune.Set, error) {
	if h.Tokens > math.MaxInt32 {
		return nil, fmt.Errorf("%w: packet %s: %d tokens: positions beyond int32", ErrCorruption, h.ID.Short(), h.Tokens)
	}
	keep, err := format.DecodePositions(b, int(h.Layers), int(h.KVHeads), int(h.Tokens), int(h.KeptTokens))
	if err != nil {
		return nil, fmt.Errorf("packet %s: %w", h.ID.Short(), err)
	}
	return &prune.Set{Layers: int(h.Layers), KVHeads: int(h.KVHeads), Tokens: int(h.Tokens), Keep: keep}, nil
}

// Pruned reports whether the packet was stored pruned: Layer then returns
// [kv_heads][k][head_dim] tensors and Keep says which rows they are.
func (v *View) Pruned() bool { return v.h.Pruned() }

// Keep returns the kept local positions of a pruned packet, k per (layer,
// KV head) in row order (see package prune): row j of head h of
// Layer(l) is the packet's row Keep().Kept(l, h)[j]. It is nil for a whole
// packet. The positions chunk is verified against its CRC32C and each
// bitmap checked (k bits set, none at or beyond Tokens) before it is
// returned: a bad one is ErrCorruption. The set is decoded once per view
// and shared: do not modify it.
func (v *View) Keep() (*prune.Set, error) {
	if !v.h.Pruned() {
		return nil, nil
	}
	v.keepMu.Lock()
	defer v.keepMu.Unlock()
	if v.keep != nil {
		return v.keep, nil
	}
	b, err := v.Chunk(v.h.PositionsChunk())
	if err != nil {
		return nil, err
	}
	s, err := DecodePositions(v.h, b)
	if err != nil {
		v.st.Corruptions.Add(1)
		return nil, err
	}
	v.keep = s
	return s, nil
}
