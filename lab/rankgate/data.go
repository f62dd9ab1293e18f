package rankgate

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/lab/llama"
	"github.com/kvstore/kvstore/lab/train"
	"github.com/kvstore/kvstore/reconstruct"
	"github.com/kvstore/kvstore/segment"
	"github.com/kvstore/kvstore/store"
)

// Sample is one factored span's pre-RoPE keys or values in one (layer, KV
// head), as g_phi sees them and as its loss scores them.
type Sample struct {
	// Features is g_phi's input (store.RankGate.Features).
	Features []float64
	// E is e_i = s_i^2 / ||X||_F^2 for the first R components (0 past the
	// spectrum), Tail the energy past them, 1 - sum E.
	E    []float64
	Tail float64
	// Cost is the bytes of one stored component, (rows + cols + 1) x the
	// factor size, as a fraction of the span's raw bf16 rows
	// (rows x cols x 2).
	Cost float64
	// Avail is the number of components the SVD found (at most R).
	Avail             int
	Rows, Cols, Layer int
	Value             bool
}

// FactorSize is the bytes of one factor element (bf16, the model dtype
// span memory stores factors in by default).
const FactorSize = 2

// NewSample computes the sample of a span's rows x (rows x cols, row-major)
// in layer of layers: their truncated SVD at rank r as spanmem.Build takes
// it when a gate applies (seed as Build's for that span), and its features.
func NewSample(x []float32, rows, cols, layer, layers int, value bool, r int, seed uint64) (*Sample, error) {
	f, err := reconstruct.SVD(x, rows, cols, reconstruct.SVDOptions{MaxRank: r, Rank: r, Seed: seed})
	if err != nil {
		return nil, err
	}
	var total float64
	for _, v := range x {
		total += float64(v) * float64(v)
	}
	s := &Sample{Features: (&store.RankGate{MaxRank: r}).Features(f.S, total, rows, cols, layer, layers, value),
		E: make([]float64, r), Tail: 1, Avail: f.Rank, Rows: rows, Cols: cols, Layer: layer, Value: value,
		Cost: float64((rows+cols+1)*FactorSize) / float64(rows*cols*2)}
	if total == 0 {
		s.Tail = 0
		return s, nil
	}
	for i, v := range f.S {
		s.E[i] = float64(v) * float64(v) / total
		s.Tail -= s.E[i]
	}
	s.Tail = max(0, s.Tail)
	return s, nil
}

// ErrSpanSVD marks a context whose span could not be factored
// (reconstruct.SVD's error is wrapped too): spanmem.Build refuses that
// context as well, so a caller may leave it out and count it.
var ErrSpanSVD = errors.New("rank gate: a span's SVD failed")

// ContextSamples prefills tokens on m at position 0 and returns the
// samples of every factored span (segmentation by surprisal with seg),
// every layer and KV head, K and V, at r_max r.
func ContextSamples(m *llama.Model, tokens []int, r int, seg segment.Options) ([]*Sample, error) {
	res, err := m.Forward(tokens, 0, nil, llama.ForwardOptions{})
	if err != nil {
		return nil, err
	}
	n := len(tokens)
	h := make([]float32, n)
	h[0] = float32(math.NaN())
	for t := 1; t < n; t++ {
		h[t] = float32(res.Surprisal[t-1])
	}
	sg, err := segment.Split(h, seg)
	if err != nil {
		return nil, err
	}
	c := res.Cache
	hd, layers := c.HeadDim, len(c.Layers)
	var out []*Sample
	for l, kv := range c.Layers {
		for hh := range c.KVHeads {
			g := l*c.KVHeads + hh
			for si, sp := range sg.Spans {
				if !sp.Factored {
					continue
				}
				lo, hi := (hh*n+sp.Start)*hd, (hh*n+sp.End)*hd
				k := append([]float32(nil), kv.K[lo:hi]...)
				for i := range sp.Len() {
					reconstruct.Unapply(m.RoPE(), k[i*hd:(i+1)*hd], int64(sp.Start+i))
				}
				seed := uint64(g)<<32 | uint64(si)
				sk, err := NewSample(k, sp.Len(), hd, l, layers, false, r, seed)
				if err != nil {
					return nil, fmt.Errorf("%w: layer %d head %d span %d keys: %w", ErrSpanSVD, l, hh, si, err)
				}
				sv, err := NewSample(kv.V[lo:hi], sp.Len(), hd, l, layers, true, r, seed^0x9e3779b97f4a7c15)
				if err != nil {
					return nil, fmt.Errorf("%w: layer %d head %d span %d values: %w", ErrSpanSVD, l, hh, si, err)
				}
				out = append(out, sk, sv)
			}
		}
	}
	return out, nil
}

// Contexts draws n contexts of length tokens from files, each BOS and then
// a cut of length-1 bytes, and returns the samples of all of them. ctx is
// checked before each context.
func Contexts(ctx context.Context, m *llama.Model, files *train.ByteFiles, rng *rand.Rand, n, length, r int, seg segment.Options) ([]*Sample, error) {
	if length < 2 {
		return nil, fmt.Errorf("%w: rank gate: contexts of %d tokens", format.ErrInvalidArgument, length)
	}
	var out []*Sample
	for range n {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("rank gate: drawing contexts: %w", err)
		}
		chunk, err := files.Chunk(rng, length-1)
		if err != nil {
			return nil, err
		}
		s, err := ContextSamples(m, append([]int{train.BOS}, chunk...), r, seg)
		if err != nil {
			return nil, err
		}
		out = append(out, s...)
	}
	return out, nil
}
