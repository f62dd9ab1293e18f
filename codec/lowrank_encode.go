package codec

import (
	"encoding/binary"
	"math"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/reconstruct"
)

// encodeLowRank factors each head of src (K rows un-rotated first) and
// appends the chunk to dst.
func encodeLowRank(dst, src []byte, d Desc, o *Options) ([]byte, error) {
	var rope *reconstruct.RoPE
	if d.Kind == format.ChunkK {
		if o.RoPE == nil {
			return dst, d.invalid("low rank: a K chunk needs Options.RoPE")
		}
		r, err := reconstruct.NewRoPE(*o.RoPE, d.HeadDim)
		if err != nil {
			return dst, d.invalid("low rank: %v", err)
		}
		rope = r
	}
	fs, err := lowRankFactors(src, d, rope, o)
	if err != nil {
		return dst, err
	}
	fdt := o.FactorDType
	if fdt == format.DTypeF16 && !factorsFitF16(fs) {
		fdt = format.DTypeF32
	}
	start := len(dst)
	dst = append(dst, make([]byte, lowRankHeader+2*d.Heads)...)
	h := dst[start:]
	h[0] = byte(fdt)
	if rope != nil {
		putRoPE(h, o.RoPE)
	}
	for i, f := range fs {
		binary.LittleEndian.PutUint16(h[lowRankHeader+2*i:], uint16(f.Rank))
	}
	for _, f := range fs {
		out, err := reconstruct.AppendFactors(dst, f, fdt)
		if err != nil {
			return dst[:start], d.invalid("low rank: %v", err)
		}
		dst = out
	}
	return dst, nil
}

// lowRankFactors returns the truncated SVD of every head of src, rows
// un-rotated by rope at their positions 0..tokens-1 first when it is not
// nil. Rows longer than lowRankLimit, NaNs and infinities are refused.
func lowRankFactors(src []byte, d Desc, rope *reconstruct.RoPE, o *Options) ([]*reconstruct.Factors, error) {
	t, dim := d.Tokens, d.HeadDim
	so := reconstruct.SVDOptions{Seed: lowRankSeed, Rank: o.Rank, MaxRank: o.Rank}
	if o.Rank == 0 {
		so.Energy, so.MaxRank = o.Energy, min(t, dim, RankLimit)
		if o.MaxRank > 0 {
			so.MaxRank = min(so.MaxRank, o.MaxRank)
		}
	}
	scale := float32(1)
	if rope != nil {
		scale = rope.AttentionScale()
	}
	lim := lowRankLimit(d.DType, scale)
	a := make([]float32, t*dim)
	head := t * dim * d.DType.Size()
	fs := make([]*reconstruct.Factors, d.Heads)
	for h := range fs {
		if err := format.ToF32(a, src[h*head:(h+1)*head], d.DType); err != nil {
			return nil, d.invalid("low rank: %v", err)
		}
		for r := range t {
			row := a[r*dim : (r+1)*dim]
			if n := rowNorm(row); !(n <= lim) {
				return nil, d.invalid("low rank: head %d token %d: row norm %v is not finite or above %v", h, r, n, lim)
			}
			if rope != nil {
				reconstruct.Unapply(rope, row, int64(r))
			}
		}
		f, err := reconstruct.SVD(a, t, dim, so)
		if err != nil {
			return nil, d.invalid("low rank: head %d: %v", h, err)
		}
		fs[h] = f
	}
	return fs, nil
}

// rowNorm is the Euclidean norm of x in float64 (NaN when x holds one).
func rowNorm(x []float32) float64 {
	var s float64
	for _, v := range x {
		s += float64(v) * float64(v)
	}
	return math.Sqrt(s)
}

// factorsFitF16 reports whether every factor rounds to a finite f16.
func factorsFitF16(fs []*reconstruct.Factors) bool {
	for _, f := range fs {
		for _, part := range [][]float32{f.U, f.S, f.Vt} {
			for _, v := range part {
				if !finiteIn(format.DTypeF16, v) {
					return false
				}
			}
		}
	}
	return true
}
