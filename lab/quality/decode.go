package quality

import (
	"cmp"
	"math"
	"slices"

	"github.com/kvstore/kvstore/lab/llama"
)

// rowSet is the context rows one (layer, KV head) attends over at a step:
// keys post-RoPE, values, and per row a logit bias (nil: none).
type rowSet struct {
	k, v, bias []float32
}

// method is one way of keeping the context: it says, at each step and
// layer, which context rows each KV head attends over.
type method interface {
	// rows returns the context rows of every KV head of a's layer for the
	// step a belongs to (a's queries may steer them).
	rows(a *llama.StepAttention) ([]rowSet, error)
}

// decode feeds cont at positions n, n+1, ... through m, each layer
// attending over meth's context rows and then the continuation rows so far
// (the token's own last), and returns the logits after each token.
func decode(m *llama.Model, meth method, cont []int, n int) ([][]float32, error) {
	hd, groupOf := m.HeadDim(), m.Heads/m.KVHeads
	recentK := make([][][]float32, m.Layers) // [layer][kv head] rows
	recentV := make([][][]float32, m.Layers)
	// Per (layer, KV head), the rows attended at the last step and the
	// context rows they started with: a method that keeps the same context
	// rows (fixedRows) has them extended by the new row, not copied again.
	lastK, lastV := make([][]float32, m.Layers*m.KVHeads), make([][]float32, m.Layers*m.KVHeads)
	lastCtx := make([]rowSet, m.Layers*m.KVHeads)
	for l := range recentK {
		recentK[l], recentV[l] = make([][]float32, m.KVHeads), make([][]float32, m.KVHeads)
	}
	attend := func(a *llama.StepAttention) error {
		sets, err := meth.rows(a)
		if err != nil {
			return err
		}
		for g := range m.KVHeads {
			recentK[a.Layer][g] = append(recentK[a.Layer][g], a.K[g*hd:(g+1)*hd]...)
			recentV[a.Layer][g] = append(recentV[a.Layer][g], a.V[g*hd:(g+1)*hd]...)
			rs, gi := sets[g], a.Layer*m.KVHeads+g
			var keys, vals []float32
			if sameRows(lastCtx[gi], rs) && lastK[gi] != nil {
				keys = append(lastK[gi], a.K[g*hd:(g+1)*hd]...)
				vals = append(lastV[gi], a.V[g*hd:(g+1)*hd]...)
			} else {
				keys = append(append([]float32(nil), rs.k...), recentK[a.Layer][g]...)
				vals = append(append([]float32(nil), rs.v...), recentV[a.Layer][g]...)
			}
			lastK[gi], lastV[gi], lastCtx[gi] = keys, vals, rs
			var bias []float32
			if rs.bias != nil {
				bias = append(append([]float32(nil), rs.bias...), make([]float32, len(recentK[a.Layer][g])/hd)...)
			}
			for h := g * groupOf; h < (g+1)*groupOf; h++ {
				llama.Attend(a.Out[h*hd:(h+1)*hd], a.Q[h*hd:(h+1)*hd], keys, vals, bias)
			}
		}
		return nil
	}
	out := make([][]float32, len(cont))
	for i, tok := range cont {
		logits, err := m.Step(tok, int64(n+i), attend)
		if err != nil {
			return nil, err
		}
		out[i] = logits
	}
	return out, nil
}

// sameRows reports whether two row sets are the same slices (a method
// handing back the rows of its last step).
func sameRows(a, b rowSet) bool {
	same := func(x, y []float32) bool {
		return len(x) == len(y) && (len(x) == 0 || &x[0] == &y[0])
	}
	return same(a.k, b.k) && same(a.v, b.v) && a.bias == nil && b.bias == nil && len(a.k) > 0
}

// fixedRows keeps the same context rows at every step: full attention
// (all rows) or a baseline's subset.
type fixedRows struct {
	sets [][]rowSet // [layer][kv head]
}

func (f *fixedRows) rows(a *llama.StepAttention) ([]rowSet, error) { return f.sets[a.Layer], nil }

// keepRows is the method attending over the given context tokens
// (ascending) of a prefilled cache.
func keepRows(c *llama.Cache, tokens []int) *fixedRows {
	hd, n := c.HeadDim, c.Len()
	f := &fixedRows{sets: make([][]rowSet, len(c.Layers))}
	for l, kv := range c.Layers {
		f.sets[l] = make([]rowSet, c.KVHeads)
		for g := range c.KVHeads {
			rs := rowSet{k: make([]float32, 0, len(tokens)*hd), v: make([]float32, 0, len(tokens)*hd)}
			for _, t := range tokens {
				rs.k = append(rs.k, kv.K[(g*n+t)*hd:(g*n+t+1)*hd]...)
				rs.v = append(rs.v, kv.V[(g*n+t)*hd:(g*n+t+1)*hd]...)
			}
			f.sets[l][g] = rs
		}
	}
	return f
}

// allTokens is 0..n-1.
func allTokens(n int) []int {
	t := make([]int, n)
	for i := range t {
		t[i] = i
	}
	return t
}

// windowTokens is StreamingLLM's choice of b rows: the sinks and the most
// recent b-sinks tokens.
func windowTokens(n, b int) []int {
	s := min(sinks, b)
	t := allTokens(s)
	for i := max(s, n-(b-s)); i < n; i++ {
		t = append(t, i)
	}
	return t
}

// topSurprisal is the b tokens of highest surprisal (NaN, token 0's, first;
// ties to the earlier token), ascending.
func topSurprisal(h []float32, b int) []int {
	t := allTokens(len(h))
	key := func(i int) float32 {
		if h[i] != h[i] {
			return float32(1e30)
		}
		return h[i]
	}
	slices.SortStableFunc(t, func(a, b int) int { return cmp.Compare(key(b), key(a)) })
	t = t[:min(b, len(t))]
	slices.Sort(t)
	return t
}

// surprisal is SeKV's H_t of every token a prefill from position 0 saw:
// token t's is the prefill's Surprisal[t-1], token 0's NaN (nothing
// predicts it).
func surprisal(pre *llama.Result, n int) []float32 {
	h := make([]float32, n)
	h[0] = float32(math.NaN())
	for t := 1; t < n; t++ {
		h[t] = float32(pre.Surprisal[t-1])
	}
	return h
}
