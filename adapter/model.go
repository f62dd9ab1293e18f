package adapter

import (
	"fmt"
	"math"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/reconstruct"
)

// Model is what an adapter needs of a model: its input embeddings and a
// prefill from input embeddings. The reference model (*llama.Model of
// lab/llama) and llama.cpp (llamacpp.AdapterModel) implement it; so can
// any other runtime that accepts input embeddings in place of token ids.
//
// The methods use only built-in and engine types, so that a model package
// implements Model without importing this one.
type Model interface {
	// EmbeddingDim is the width of an input-embedding row (the residual
	// stream entering the first layer): an adapter's Dim.
	EmbeddingDim() int
	// AppendEmbeddings appends the input-embedding rows of tokens,
	// EmbeddingDim values each, to dst. A token outside the vocabulary is
	// an error (wrapping the model's invalid-argument sentinel).
	AppendEmbeddings(dst []float32, tokens []int) ([]float32, error)
	// EmbeddingStats is the mean and standard deviation of each column of
	// the token embedding matrix (ColumnStats computes them from the
	// matrix): what Init draws rows from.
	EmbeddingStats() (mean, std []float64)
	// RoPE is the rotary embedding the model applies to keys. Prefill
	// re-rotates keys with it (HideHeader), and store.Assemble rotates
	// stored packets with the spec's RoPE, so it must be the rotation the
	// model really applies.
	RoPE() *reconstruct.RoPE
	// PrefillEmbeddings runs the model over the rows of x (a whole number
	// of EmbeddingDim-wide rows, flat) as a new sequence from position 0,
	// alone, and returns every layer's keys (after RoPE, at positions 0,
	// 1, ...) and values, each laid out [KV heads][rows][RoPE().HeadDim()]
	// float32: the layout of store.Layer. The slices become the caller's.
	PrefillEmbeddings(x []float32) (k, v [][]float32, err error)
}

// KV is the keys and values of a prefilled sequence's rows, model-neutral:
// for every layer l, K[l] and V[l] are [KVHeads][Rows()][HeadDim] float32
// (store.Layer's layout, before conversion to the packet's dtype), keys
// rotated for positions 0, 1, ..., Rows()-1.
type KV struct {
	KVHeads, HeadDim int
	K, V             [][]float32
}

// Rows is the number of rows (tokens) each layer holds.
func (kv *KV) Rows() int {
	if len(kv.K) == 0 || kv.KVHeads <= 0 || kv.HeadDim <= 0 {
		return 0
	}
	return len(kv.K[0]) / (kv.KVHeads * kv.HeadDim)
}

// check verifies that every layer holds Rows() rows of the KV's shape.
func (kv *KV) check() error {
	if kv.KVHeads <= 0 || kv.HeadDim <= 0 || len(kv.K) == 0 || len(kv.K) != len(kv.V) {
		return fmt.Errorf("%w: adapter: KV of %d kv heads x %d dims, %d K and %d V layers",
			format.ErrInvalidArgument, kv.KVHeads, kv.HeadDim, len(kv.K), len(kv.V))
	}
	per := kv.KVHeads * kv.HeadDim
	n := len(kv.K[0])
	for l := range kv.K {
		if len(kv.K[l]) != n || len(kv.V[l]) != n || n%per != 0 {
			return fmt.Errorf("%w: adapter: KV layer %d has %d K and %d V values, not rows of %d kv heads x %d dims like layer 0's %d",
				format.ErrInvalidArgument, l, len(kv.K[l]), len(kv.V[l]), kv.KVHeads, kv.HeadDim, n)
		}
	}
	return nil
}

// from returns rows [lo, Rows()) of kv, copied.
func (kv *KV) from(lo int) *KV {
	n, hd := kv.Rows(), kv.HeadDim
	out := &KV{KVHeads: kv.KVHeads, HeadDim: hd, K: make([][]float32, len(kv.K)), V: make([][]float32, len(kv.V))}
	part := func(x []float32) []float32 {
		y := make([]float32, 0, kv.KVHeads*(n-lo)*hd)
		for h := range kv.KVHeads {
			y = append(y, x[(h*n+lo)*hd:(h+1)*n*hd]...)
		}
		return y
	}
	for l := range kv.K {
		out.K[l], out.V[l] = part(kv.K[l]), part(kv.V[l])
	}
	return out
}

// prefill runs m over x and returns its KV, checked against the shape m
// says it has.
func prefill(m Model, x []float32) (*KV, error) {
	d, r := m.EmbeddingDim(), m.RoPE()
	if d <= 0 || len(x) == 0 || len(x)%d != 0 || r == nil {
		return nil, fmt.Errorf("%w: adapter: prefill of %d values for a model of width %d", format.ErrInvalidArgument, len(x), d)
	}
	k, v, err := m.PrefillEmbeddings(x)
	if err != nil {
		return nil, err
	}
	n, hd := len(x)/d, r.HeadDim()
	if len(k) == 0 || len(k[0]) == 0 || len(k[0])%(n*hd) != 0 {
		got := 0
		if len(k) > 0 {
			got = len(k[0])
		}
		return nil, fmt.Errorf("%w: adapter: the model's prefill of %d rows gave %d layers, %d keys in layer 0: not heads of %d rows x %d dims",
			format.ErrInvalidArgument, n, len(k), got, n, hd)
	}
	kv := &KV{KVHeads: len(k[0]) / (n * hd), HeadDim: hd, K: k, V: v}
	if err := kv.check(); err != nil {
		return nil, fmt.Errorf("adapter: the model's prefill: %w", err)
	}
	return kv, nil
}

// ColumnStats returns the mean and standard deviation (population, float64)
// of each of the dim columns of rows, a row-major matrix of len(rows)/dim
// rows: a Model's EmbeddingStats from its token embedding matrix. It sums
// in row order, as lab/llama's Model.EmbeddingStats does, so one matrix
// gives the same statistics, bit for bit, through either.
func ColumnStats(rows []float32, dim int) (mean, std []float64) {
	if dim <= 0 || len(rows) < dim {
		return make([]float64, max(dim, 0)), make([]float64, max(dim, 0))
	}
	n := len(rows) / dim
	mean, std = make([]float64, dim), make([]float64, dim)
	for t := range n {
		for j, v := range rows[t*dim : (t+1)*dim] {
			mean[j] += float64(v)
		}
	}
	for j := range mean {
		mean[j] /= float64(n)
	}
	for t := range n {
		for j, v := range rows[t*dim : (t+1)*dim] {
			dv := float64(v) - mean[j]
			std[j] += dv * dv
		}
	}
	for j := range std {
		std[j] = math.Sqrt(std[j] / float64(n))
	}
	return mean, std
}
