package prune

import "fmt"

// SnapKVScores scores each of the first tokens rows as SnapKV does
// ("SnapKV: LLM Knows What You are Looking for Before Generation", Li et
// al. 2024): the attention of the last `queries` query rows (the
// observation window) summed over those queries and over the query heads
// of each KV head (TOVAScores), then max-pooled along the positions with
// an odd kernel (a row scores the most any row within kernel/2 positions
// of it got), so that the neighbours of a voted row are kept with it.
func SnapKVScores(att [][][][]float32, kvHeads, tokens, queries, kernel int) ([][]float32, error) {
	if kernel < 1 || kernel%2 == 0 {
		return nil, fmt.Errorf("%w: prune: snapkv: pooling kernel %d, want odd and positive", ErrInvalidArgument, kernel)
	}
	sc, err := TOVAScores(att, kvHeads, tokens, queries)
	if err != nil {
		return nil, err
	}
	for g, row := range sc {
		sc[g] = maxPool(row, kernel/2)
	}
	return sc, nil
}

// maxPool is the running maximum of x over [i-r, i+r], clamped at the ends.
func maxPool(x []float32, r int) []float32 {
	out := make([]float32, len(x))
	for i := range x {
		m := x[i]
		for j := max(0, i-r); j <= min(len(x)-1, i+r); j++ {
			m = max(m, x[j])
		}
		out[i] = m
	}
	return out
}

// SnapKV keeps, per (layer, KV head), keep of the first tokens rows: the
// last min(window, keep) of them (the observation window, most recent
// first), then the best of SnapKVScores. window 0 keeps votes alone (the
// observation window's own rows lie elsewhere, e.g. a query decoded after
// the tokens).
func SnapKV(att [][][][]float32, kvHeads, tokens, queries, kernel, window, keep int) (*Set, error) {
	sc, err := SnapKVScores(att, kvHeads, tokens, queries, kernel)
	if err != nil {
		return nil, err
	}
	if window < 0 || window > tokens {
		return nil, fmt.Errorf("%w: prune: snapkv: window %d of %d tokens", ErrInvalidArgument, window, tokens)
	}
	var anchors []int
	for t := tokens - 1; t >= tokens-min(window, keep); t-- {
		anchors = append(anchors, t)
	}
	return Select(len(att), kvHeads, tokens, sc, keep, anchors)
}
