package codec

import (
	"bytes"
	"testing"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/reconstruct"
)

// TestLowRankDecodeMatchesRowByRow checks that the decoder, which computes
// a batch's rotation table once for all heads, writes exactly the bytes of
// the row-by-row reference (RoPE.Apply per row, head by head), for every
// dtype, RoPE variant and shape, tokens across several batches included.
func TestLowRankDecodeMatchesRowByRow(t *testing.T) {
	ropes := []format.RoPE{ropeHalf, ropeInterleaved, ropeLlama3, ropeYaRN}
	for _, dt := range allDTypes {
		for _, k := range allKinds {
			for i, s := range append(append([][3]int(nil), shapes[:8]...), [3]int{3, 150, 32}) {
				d := desc(k, dt, s)
				if k == format.ChunkK && s[2] == 1 {
					continue
				}
				src := kvData(d, uint64(7+i))
				for _, o := range []Options{{Rank: 2}, {Rank: min(s[1], s[2])}, {Energy: 0.9, FactorDType: format.DTypeBF16}} {
					o.RoPE = ropeFor(ropes[i%len(ropes)], s[2])
					enc := mustEncode(t, src, format.CodecLowRank, d, o)
					got := mustDecode(t, enc, format.CodecLowRank, d)
					want := make([]byte, d.RawSize())
					if err := decodeLowRankRowByRow(want, enc, d); err != nil {
						t.Fatal(err)
					}
					if !bytes.Equal(got, want) {
						t.Fatalf("%v %+v: decoded bytes differ from the row-by-row reference", d, o)
					}
				}
			}
		}
	}
}

// decodeLowRank reconstructs every head of a low-rank chunk into dst, a
// batch of rows at a time, RoPE applied at positions 0..tokens-1 for keys.
func decodeLowRankRowByRow(dst, src []byte, d Desc) error {
	l, err := parseLowRank(src, d)
	if err != nil {
		return err
	}
	rows := min(d.Tokens, lowRankRows)
	w := lowRankRowDecoder{l: &l, d: d, src: src, dst: dst,
		s: make([]float32, l.maxRank), vt: make([]float32, l.maxRank*d.HeadDim),
		u: make([]float32, rows*l.maxRank), out: make([]float32, rows*d.HeadDim)}
	if l.rope != nil {
		w.pos = make([]int64, rows)
	}
	off := lowRankHeader + 2*d.Heads
	for h := range d.Heads {
		fl := lowRankFactorLayout(d, lowRankRank(src, h), l.fdt)
		if err := w.head(h, src[off:off+fl.Size()], fl); err != nil {
			return err
		}
		off += fl.Size()
	}
	return nil
}

// lowRankRowDecoder holds one Decode's scratch: one head's S and Vt, and a
// batch of rows of U and of output.
type lowRankRowDecoder struct {
	l        *lowRankLayout
	d        Desc
	src, dst []byte
	s, vt    []float32
	u, out   []float32
	pos      []int64
}

// head checks head h's factor encoding b (layout fl) and reconstructs the
// head into its rows of dst.
func (w *lowRankRowDecoder) head(h int, b []byte, fl reconstruct.FactorLayout) error {
	c, d := format.CodecLowRank, w.d
	got, err := reconstruct.ParseFactorLayout(b)
	if err != nil {
		return corrupt(c, d, "head %d: %v", h, err)
	}
	if got != fl {
		return corrupt(c, d, "head %d: factors of %dx%d rank %d %v, want %dx%d rank %d %v",
			h, got.Rows, got.Cols, got.Rank, got.DType, fl.Rows, fl.Cols, fl.Rank, fl.DType)
	}
	r, dim, e := fl.Rank, fl.Cols, fl.DType.Size()
	f := reconstruct.Factors{Cols: dim, Rank: r, S: w.s[:r], Vt: w.vt[:r*dim]}
	if err := format.ToF32(f.S, b[fl.SOffset():fl.VtOffset()], fl.DType); err != nil {
		return corrupt(c, d, "head %d: %v", h, err)
	}
	if err := format.ToF32(f.Vt, b[fl.VtOffset():fl.Size()], fl.DType); err != nil {
		return corrupt(c, d, "head %d: %v", h, err)
	}
	for i, s := range f.S {
		if !(s >= 0) || isInf(s) {
			return corrupt(c, d, "head %d: singular value %d is %v", h, i, s)
		}
	}
	rowBytes := dim * d.DType.Size()
	for t0 := 0; t0 < d.Tokens; t0 += lowRankRows {
		n := min(lowRankRows, d.Tokens-t0)
		f.Rows, f.U = n, w.u[:n*r]
		if err := format.ToF32(f.U, b[fl.UOffset()+t0*r*e:fl.UOffset()+(t0+n)*r*e], fl.DType); err != nil {
			return corrupt(c, d, "head %d: %v", h, err)
		}
		var pos []int64
		if w.l.rope != nil {
			pos = w.pos[:n]
			for i := range pos {
				pos[i] = int64(t0 + i)
			}
		}
		out := w.out[:n*dim]
		if err := reconstruct.ReconstructInto(out, &f, nil, w.l.rope, pos); err != nil {
			return corrupt(c, d, "head %d: %v", h, err)
		}
		lim := finiteLimit(d.DType)
		for i, v := range out {
			if !(abs32(v) < lim) {
				return corrupt(c, d, "head %d token %d: reconstructs to %v, not finite in %v", h, t0+i/dim, v, d.DType)
			}
		}
		at := (h*d.Tokens + t0) * rowBytes
		if err := format.FromF32(w.dst[at:at+n*rowBytes], out, d.DType); err != nil {
			return corrupt(c, d, "head %d: %v", h, err)
		}
	}
	return nil
}
