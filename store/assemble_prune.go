package store

import (
	"context"
	"fmt"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/prune"
)

// Pruned assembly: an item with a keep-set (PrepareAssemblePruned), or a
// packet stored pruned (Packet.Keep, store/internal/packet), places k rows per (layer,
// KV head) at the item's rows [Row, Row+k), keys rotated from their kept
// local positions t to Offset+t; Positions gives each (layer, KV head)'s
// index map. store/internal/assemble (prune.go) says how.

// Positions is the index map of (layer, KV head): the absolute position of
// each of the destination's Tokens() rows of that head, in row order.
// Without keep-sets it is each item's Offset, Offset+1, ...; a pruned
// item's rows (a keep-set given, or a packet stored pruned) have Offset +
// their kept local positions.
func (a *Assembly) Positions(layer, head int) ([]int64, error) {
	return a.in.Positions(layer, head)
}

// PrepareAssemblePruned is PrepareAssemble with a keep-set per item (see
// package prune): keep[i] nil places item i as stored (whole, or the rows a
// pruned packet kept), otherwise only the rows it keeps, k per (layer, KV
// head) (the same k for every head). The assembly then has fewer rows,
// Packets reports each item's Tokens = k and its keep-set, and Positions
// gives each (layer, KV head)'s index map. A keep-set is over the
// document's positions 0..Tokens-1 even for a packet stored pruned, whose
// stored rows it must then select from. A keep-set that does not fit its
// packet, keeps different numbers of rows per head, or keeps a row a
// pruned packet did not store is ErrInvalidArgument.
func (db *DB) PrepareAssemblePruned(ctx context.Context, ns string, model format.Fingerprint, items []AssembleItem, keep []*prune.Set) (*Assembly, error) {
	if len(keep) != len(items) {
		return nil, fmt.Errorf("%w: assemble: %d keep-sets for %d items", ErrInvalidArgument, len(keep), len(items))
	}
	return db.prepareAssemble(ctx, ns, model, items, keep)
}
