package prune

import "fmt"

// WindowScores scores each of tokens rows by its position, the most recent
// best, for layers*kvHeads rows: Select over them with the first tokens as
// anchors (FirstAnchors) is StreamingLLM's cache ("Efficient Streaming
// Language Models with Attention Sinks", Xiao et al. 2024), the attention
// sinks and the most recent rows.
func WindowScores(layers, kvHeads, tokens int) [][]float32 {
	out := make([][]float32, layers*kvHeads)
	for g := range out {
		out[g] = make([]float32, tokens)
		for t := range out[g] {
			out[g][t] = float32(t)
		}
	}
	return out
}

// Window keeps, per (layer, KV head), the first sinks rows and the last
// keep-sinks (all keep of them the last when sinks is 0).
func Window(layers, kvHeads, tokens, keep, sinks int) (*Set, error) {
	if sinks < 0 {
		return nil, fmt.Errorf("%w: prune: window: %d sinks", ErrInvalidArgument, sinks)
	}
	return Select(layers, kvHeads, tokens, WindowScores(layers, kvHeads, tokens), keep, FirstAnchors(tokens, sinks, 0))
}
