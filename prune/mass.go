package prune

import (
	"fmt"
	"math"
	"slices"
)

// Attention-mass budgets: a kept fraction decided per packet from the
// document itself.
//
// A fixed fraction keeps as many rows of a document whose attention is
// spread over many tokens as of one whose attention sits on a few, and a
// fraction that is free on the second loses on the first. MassKeep reads
// how spread the votes are (TOVAScores, SnapKVScores: the attention of the
// prefill's last queries, all a stored packet has to decide with): for
// every (layer, KV head), the fewest rows whose scores hold at least a
// share of that row's total, and the largest of these over the packet, at
// least a floor. A stored packet keeps one number of rows per (layer, KV
// head) (docs/format.md, "Pruned packets"), so the most spread head sets
// the budget of all; the others keep their best rows beyond their share.

// MassKeep returns the rows to keep per (layer, KV head) for scores
// (layers*kvHeads rows of tokens non-negative scores, as TOVAScores
// returns): the largest, over the rows of scores, of the fewest tokens
// whose scores sum to at least share of the row's total, and at least
// minKeep (clipped to tokens). share is in (0, 1]; a row whose scores are
// all 0 needs minKeep.
func MassKeep(scores [][]float32, share float64, minKeep int) (int, error) {
	if len(scores) == 0 || !(share > 0 && share <= 1) || minKeep < 1 {
		return 0, fmt.Errorf("%w: prune: mass: %d score rows, share %v, min %d", ErrInvalidArgument, len(scores), share, minKeep)
	}
	tokens := len(scores[0])
	keep := min(minKeep, tokens)
	for g, sc := range scores {
		if len(sc) != tokens || tokens == 0 {
			return 0, fmt.Errorf("%w: prune: mass: score row %d has %d entries, row 0 %d", ErrInvalidArgument, g, len(sc), tokens)
		}
		k, err := massRows(sc, share)
		if err != nil {
			return 0, fmt.Errorf("prune: mass: score row %d: %w", g, err)
		}
		keep = max(keep, k)
	}
	return keep, nil
}

// massRows is the fewest entries of sc whose sum is at least share of its
// total (0 when the total is 0).
func massRows(sc []float32, share float64) (int, error) {
	s := make([]float64, len(sc))
	var total float64
	for i, x := range sc {
		if !(x >= 0) || math.IsInf(float64(x), 0) {
			return 0, fmt.Errorf("%w: score %d is %v, want finite and non-negative", ErrInvalidArgument, i, x)
		}
		s[i] = float64(x)
		total += s[i]
	}
	if total == 0 {
		return 0, nil
	}
	slices.SortFunc(s, func(a, b float64) int {
		switch {
		case a > b:
			return -1
		case a < b:
			return 1
		}
		return 0
	})
	// Scores are float32 (attention sums): the bound is lowered by a
	// relative 1e-6, below their precision, so that rounding never asks
	// for one more row (a share of 1 ends at the last non-zero score).
	need, acc := share*total*(1-1e-6), 0.0
	for i, x := range s {
		acc += x
		if acc >= need {
			return i + 1, nil
		}
	}
	return len(s), nil
}

// Mass keeps, per (layer, KV head), MassKeep(scores, share, minKeep) rows:
// the anchors first, then the highest scores (Select). It returns the set
// and the rows it keeps per (layer, KV head).
func Mass(layers, kvHeads, tokens int, scores [][]float32, share float64, minKeep int, anchors []int) (*Set, int, error) {
	if layers*kvHeads != len(scores) {
		return nil, 0, fmt.Errorf("%w: prune: mass: %d score rows for %d layers x %d heads", ErrInvalidArgument, len(scores), layers, kvHeads)
	}
	k, err := MassKeep(scores, share, minKeep)
	if err != nil {
		return nil, 0, err
	}
	s, err := Select(layers, kvHeads, tokens, scores, k, anchors)
	if err != nil {
		return nil, 0, err
	}
	return s, k, nil
}
