package llama

import (
	"fmt"

	"github.com/kvstore/kvstore/format"
)

// The methods of this file, with EmbeddingStats and RoPE, make *Model an
// adapter.Model (package adapter; this package does not import it: the
// store's tests import this one). lab/train asserts it at compile time.

// EmbeddingDim is Dim, the width of an input-embedding row.
func (m *Model) EmbeddingDim() int { return m.Dim }

// AppendEmbeddings appends the input-embedding rows of tokens (Dim values
// each) to dst. A token outside the vocabulary is ErrInvalidArgument and
// leaves dst as it was.
func (m *Model) AppendEmbeddings(dst []float32, tokens []int) ([]float32, error) {
	d := m.Dim
	for i, t := range tokens {
		if t < 0 || t >= m.Vocab {
			return dst, fmt.Errorf("%w: llama: token %d at index %d outside vocab [0, %d)", format.ErrInvalidArgument, t, i, m.Vocab)
		}
	}
	for _, t := range tokens {
		dst = append(dst, m.embed[t*d:(t+1)*d]...)
	}
	return dst, nil
}

// PrefillEmbeddings is ForwardEmbeddings of the rows of x (flat, Dim values
// each) from position 0 into a new cache, returning its layers' keys (after
// RoPE) and values, [KVHeads][rows][HeadDim] each.
func (m *Model) PrefillEmbeddings(x []float32) (k, v [][]float32, err error) {
	d := m.Dim
	if len(x) == 0 || len(x)%d != 0 {
		return nil, nil, fmt.Errorf("%w: llama: prefill of %d values, not rows of %d", format.ErrInvalidArgument, len(x), d)
	}
	rows := make([][]float32, len(x)/d)
	for i := range rows {
		rows[i] = x[i*d : (i+1)*d : (i+1)*d]
	}
	res, err := m.ForwardEmbeddings(rows, 0, nil, ForwardOptions{LastOnly: true})
	if err != nil {
		return nil, nil, err
	}
	k, v = res.Cache.KeysValues()
	return k, v, nil
}

// KeysValues returns every layer's keys (after RoPE) and values, the
// cache's own slices, [KVHeads][Len()][HeadDim] each: an adapter.KV's K and
// V.
func (c *Cache) KeysValues() (k, v [][]float32) {
	k, v = make([][]float32, len(c.Layers)), make([][]float32, len(c.Layers))
	for l, kv := range c.Layers {
		k[l], v[l] = kv.K, kv.V
	}
	return k, v
}

// CacheOf returns a cache of m holding keys k and values v (every layer's,
// [KVHeads][rows][HeadDim] each, as KeysValues or an adapter.KV gives them;
// the slices are kept, not copied) at positions 0, 1, ..., without
// pre-RoPE keys. Slices of another shape are ErrInvalidArgument.
func (m *Model) CacheOf(k, v [][]float32) (*Cache, error) {
	c := m.NewCache()
	per := m.KVHeads * m.HeadDim()
	if len(k) != m.Layers || len(v) != m.Layers || len(k[0]) == 0 || len(k[0])%per != 0 {
		return nil, fmt.Errorf("%w: llama: cache of %d K and %d V layers for a model of %d layers x %d kv heads x %d dims",
			format.ErrInvalidArgument, len(k), len(v), m.Layers, m.KVHeads, m.HeadDim())
	}
	n := len(k[0]) / per
	for l := range c.Layers {
		c.Layers[l] = LayerKV{K: k[l], V: v[l]}
	}
	for i := range n {
		c.Positions = append(c.Positions, int64(i))
	}
	if err := c.check(m.Layers, m.KVHeads, m.HeadDim()); err != nil {
		return nil, err
	}
	return c, nil
}
