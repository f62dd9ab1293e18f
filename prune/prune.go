// Package prune decides which rows of a packet to keep: KV-cache pruning
// policies as pure functions that produce keep-sets.
//
// A keep-set (Set) lists, for every (layer, KV head) of a packet, the local
// positions (0..Tokens-1, as stored) of the rows kept, strictly increasing.
// The lists are ragged in content (each head keeps its own tokens) and, as
// every policy here produces them, equal in length: a budget of Keep rows
// per (layer, KV head), which is what a paged server with per-head block
// tables of one length consumes. A kept key keeps its original local
// position, so placing it at offset o rotates it by o like any other row.
//
// Policies rank rows by a score per (layer, KV head) and keep the best:
//
//   - Random: seeded uniform scores, the baseline of the KV Packet paper;
//   - TOVA: the attention the last queries of the prefill paid each row
//     (summed over the query heads sharing the KV head), as in TOVA
//     ("Transformers are Multi-State RNNs", Oren et al. 2024);
//   - SnapKV: the attention of an observation window's queries, summed
//     and max-pooled along the positions, the window itself kept first
//     (Li et al. 2024);
//   - Window: the first tokens (attention sinks) and the most recent
//     (StreamingLLM, Xiao et al. 2024);
//   - anchors: Select keeps a given anchor set first (the first tokens,
//     adapter rows) and fills the budget by any scores.
//
// The budget itself can be decided per packet from the document: Mass
// keeps the fewest rows whose votes hold a share of every (layer, KV
// head)'s attention mass; Calibrate picks the least fraction of a ladder
// whose caller-supplied probe (a decode of the document's own last tokens
// over its pruned head, say) stays within a loss bound.
//
// store.PrepareAssemblePruned applies a keep-set while assembling a stored
// packet; store.Packet.Keep stores a packet pruned, only its kept rows and
// their positions on disk. Set.MarshalBinary encodes one (layout in format/keepset.go and
// docs/format.md) for callers that keep keep-sets beside their packets.
package prune

import (
	"fmt"
	"slices"

	"github.com/kvstore/kvstore/format"
)

// ErrInvalidArgument is format.ErrInvalidArgument, which every error of
// this package wraps: a keep-set or a policy argument that does not fit
// the packet.
var ErrInvalidArgument = format.ErrInvalidArgument

// Set is a keep-set for a packet of Layers x KVHeads x Tokens rows.
type Set struct {
	Layers, KVHeads, Tokens int
	// Keep[l*KVHeads+h] are the kept local positions of (layer l, KV head
	// h), strictly increasing, each in [0, Tokens).
	Keep [][]int32
}

// Kept returns the kept positions of (layer, head).
func (s *Set) Kept(layer, head int) []int32 { return s.Keep[layer*s.KVHeads+head] }

// Rows is how many rows each (layer, KV head) keeps when they all keep the
// same number, and false otherwise.
func (s *Set) Rows() (int, bool) {
	if len(s.Keep) == 0 {
		return 0, false
	}
	n := len(s.Keep[0])
	for _, k := range s.Keep[1:] {
		if len(k) != n {
			return 0, false
		}
	}
	return n, true
}

// Validate checks the shape and every list: Layers*KVHeads lists of
// strictly increasing positions in [0, Tokens), each at least one long.
func (s *Set) Validate() error {
	if s.Layers < 1 || s.KVHeads < 1 || s.Tokens < 1 || len(s.Keep) != s.Layers*s.KVHeads {
		return fmt.Errorf("%w: prune: keep-set of %d lists for %d layers x %d heads, %d tokens", ErrInvalidArgument, len(s.Keep), s.Layers, s.KVHeads, s.Tokens)
	}
	for g, k := range s.Keep {
		if len(k) == 0 {
			return fmt.Errorf("%w: prune: keep-set: layer %d head %d keeps no row", ErrInvalidArgument, g/s.KVHeads, g%s.KVHeads)
		}
		for i, t := range k {
			if t < 0 || int(t) >= s.Tokens || i > 0 && t <= k[i-1] {
				return fmt.Errorf("%w: prune: keep-set: layer %d head %d entry %d is %d: not increasing in [0, %d)", ErrInvalidArgument, g/s.KVHeads, g%s.KVHeads, i, t, s.Tokens)
			}
		}
	}
	return nil
}

// Budget is the number of rows to keep out of tokens for a fraction f in
// (0, 1]: round(f*tokens), at least 1.
func Budget(tokens int, f float64) int {
	return min(tokens, max(1, int(f*float64(tokens)+0.5)))
}

// Select keeps, for every (layer, KV head) g, the anchors (positions in
// [0, tokens), kept first, at most keep of them, in the given order) and
// fills up to keep rows with the highest scores[g][t] (ties to the earlier
// position). scores has layers*kvHeads rows of tokens scores.
func Select(layers, kvHeads, tokens int, scores [][]float32, keep int, anchors []int) (*Set, error) {
	if layers < 1 || kvHeads < 1 || tokens < 1 || len(scores) != layers*kvHeads {
		return nil, fmt.Errorf("%w: prune: %d score rows for %d layers x %d heads", ErrInvalidArgument, len(scores), layers, kvHeads)
	}
	if keep < 1 || keep > tokens {
		return nil, fmt.Errorf("%w: prune: keep %d of %d tokens", ErrInvalidArgument, keep, tokens)
	}
	for _, a := range anchors {
		if a < 0 || a >= tokens {
			return nil, fmt.Errorf("%w: prune: anchor %d outside [0, %d)", ErrInvalidArgument, a, tokens)
		}
	}
	s := &Set{Layers: layers, KVHeads: kvHeads, Tokens: tokens, Keep: make([][]int32, len(scores))}
	for g, sc := range scores {
		if len(sc) != tokens {
			return nil, fmt.Errorf("%w: prune: score row %d has %d entries for %d tokens", ErrInvalidArgument, g, len(sc), tokens)
		}
		s.Keep[g] = selectRow(sc, keep, anchors)
	}
	return s, nil
}

// selectRow is Select for one (layer, KV head).
func selectRow(sc []float32, keep int, anchors []int) []int32 {
	taken := make([]bool, len(sc))
	out := make([]int32, 0, keep)
	for _, a := range anchors {
		if len(out) < keep && !taken[a] {
			taken[a] = true
			out = append(out, int32(a))
		}
	}
	order := make([]int32, len(sc))
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortStableFunc(order, func(a, b int32) int {
		switch {
		case sc[a] > sc[b]:
			return -1
		case sc[a] < sc[b]:
			return 1
		}
		return 0
	})
	for _, t := range order {
		if len(out) == keep {
			break
		}
		if !taken[t] {
			taken[t] = true
			out = append(out, t)
		}
	}
	slices.Sort(out)
	return out
}
