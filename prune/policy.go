package prune

import (
	"fmt"
	"math/rand/v2"
)

// RandomScores returns seeded uniform scores in [0, 1) for layers x
// kvHeads rows of tokens: Select over them keeps a uniformly random subset
// per (layer, KV head), the same for the same seed.
func RandomScores(layers, kvHeads, tokens int, seed uint64) [][]float32 {
	rng := rand.New(rand.NewPCG(seed, 0x70e5))
	out := make([][]float32, layers*kvHeads)
	for g := range out {
		out[g] = make([]float32, tokens)
		for t := range out[g] {
			out[g][t] = rng.Float32()
		}
	}
	return out
}

// Random keeps keep random rows of every (layer, KV head), seeded.
func Random(layers, kvHeads, tokens, keep int, seed uint64) (*Set, error) {
	return Select(layers, kvHeads, tokens, RandomScores(layers, kvHeads, tokens, seed), keep, nil)
}

// TOVAScores scores each of the first tokens rows by the attention the
// last `queries` query rows paid it: att[layer][head][query][key] as
// lab/llama's Forward returns it (query heads; heads/kvHeads of them
// share a KV head, grouped consecutively), summed over the query heads of
// each KV head and over the queries. TOVA proper uses the last query
// alone (queries = 1).
func TOVAScores(att [][][][]float32, kvHeads, tokens, queries int) ([][]float32, error) {
	if len(att) == 0 || kvHeads < 1 || len(att[0])%kvHeads != 0 || queries < 1 {
		return nil, fmt.Errorf("%w: prune: tova: %d layers, %d kv heads, %d queries", ErrInvalidArgument, len(att), kvHeads, queries)
	}
	heads := len(att[0])
	group := heads / kvHeads
	out := make([][]float32, len(att)*kvHeads)
	for l, layer := range att {
		if len(layer) != heads {
			return nil, fmt.Errorf("%w: prune: tova: layer %d has %d heads, layer 0 %d", ErrInvalidArgument, l, len(layer), heads)
		}
		for g := range kvHeads {
			sc := make([]float32, tokens)
			for h := g * group; h < (g+1)*group; h++ {
				q := layer[h]
				if len(q) < queries {
					return nil, fmt.Errorf("%w: prune: tova: layer %d head %d has %d queries, want %d", ErrInvalidArgument, l, h, len(q), queries)
				}
				for _, row := range q[len(q)-queries:] {
					if len(row) < tokens {
						return nil, fmt.Errorf("%w: prune: tova: layer %d head %d: %d keys, want %d", ErrInvalidArgument, l, h, len(row), tokens)
					}
					for t := range sc {
						sc[t] += row[t]
					}
				}
			}
			out[l*kvHeads+g] = sc
		}
	}
	return out, nil
}

// TOVA keeps, per (layer, KV head), the keep rows the last queries attend
// to most (see TOVAScores).
func TOVA(att [][][][]float32, kvHeads, tokens, queries, keep int) (*Set, error) {
	sc, err := TOVAScores(att, kvHeads, tokens, queries)
	if err != nil {
		return nil, err
	}
	return Select(len(att), kvHeads, tokens, sc, keep, nil)
}

// FirstAnchors returns positions 0..n-1 (attention sinks, an adapter
// header's rows) and the last m positions of tokens (an adapter trailer's
// rows), for Select's anchors.
func FirstAnchors(tokens, n, m int) []int {
	var out []int
	for t := range min(n, tokens) {
		out = append(out, t)
	}
	for t := max(n, tokens-m); t < tokens; t++ {
		out = append(out, t)
	}
	return out
}
