package llama

import (
	"fmt"
	"math"

	"github.com/kvstore/kvstore/format"
)

// ForwardEmbeddings is Forward with input embeddings in place of token ids:
// x holds one row of Dim values per input, read as the residual stream
// entering layer 0 (a token's row of the embedding matrix, or a soft token
// such as a KV Packet adapter's header and trailer rows). The rows it
// appends to cache are ordinary cache rows. Surprisal is nil (no next token
// is known). Rows of the wrong width or with a non-finite value are
// ErrInvalidArgument; x is not modified.
func (m *Model) ForwardEmbeddings(x [][]float32, startPos int64, cache *Cache, opts ForwardOptions) (*Result, error) {
	if cache == nil {
		cache = m.NewCache()
	}
	if len(x) == 0 {
		return nil, fmt.Errorf("%w: llama: forward of no embeddings", format.ErrInvalidArgument)
	}
	d := m.Dim
	flat := make([]float32, 0, len(x)*d)
	for i, row := range x {
		if len(row) != d {
			return nil, fmt.Errorf("%w: llama: embedding %d has %d values, model dim is %d", format.ErrInvalidArgument, i, len(row), d)
		}
		for j, v := range row {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				return nil, fmt.Errorf("%w: llama: embedding %d, value %d is %v", format.ErrInvalidArgument, i, j, v)
			}
		}
		flat = append(flat, row...)
	}
	pos, err := m.checkPositions(len(x), startPos, cache, opts)
	if err != nil {
		return nil, err
	}
	return m.forward(flat, pos, cache, opts, nil), nil
}

// Embed returns the input embeddings of tokens, one copied row each, for
// ForwardEmbeddings. A token outside the vocabulary is ErrInvalidArgument.
func (m *Model) Embed(tokens []int) ([][]float32, error) {
	d := m.Dim
	out := make([][]float32, len(tokens))
	for i, t := range tokens {
		if t < 0 || t >= m.Vocab {
			return nil, fmt.Errorf("%w: llama: token %d at index %d outside vocab [0, %d)", format.ErrInvalidArgument, t, i, m.Vocab)
		}
		out[i] = append([]float32(nil), m.embed[t*d:(t+1)*d]...)
	}
	return out, nil
}

// EmbeddingStats returns the mean and standard deviation of each of the
// Dim columns of the token embedding matrix, in float64: what KV Packet
// initialises adapter rows from.
func (m *Model) EmbeddingStats() (mean, std []float64) {
	d := m.Dim
	mean, std = make([]float64, d), make([]float64, d)
	for t := range m.Vocab {
		for j, v := range m.embed[t*d : (t+1)*d] {
			mean[j] += float64(v)
		}
	}
	for j := range mean {
		mean[j] /= float64(m.Vocab)
	}
	for t := range m.Vocab {
		for j, v := range m.embed[t*d : (t+1)*d] {
			dv := float64(v) - mean[j]
			std[j] += dv * dv
		}
	}
	for j := range std {
		std[j] = math.Sqrt(std[j] / float64(m.Vocab))
	}
	return mean, std
}
