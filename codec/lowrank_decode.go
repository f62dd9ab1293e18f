package codec

import (
	"sync"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/reconstruct"
)

// decodeLowRank reconstructs a low-rank chunk into dst, lowRankRows tokens
// at a time. Keys go a batch at a time, every head of the batch before the
// next: the batch's rotation table (RoPE.AppendCosSin, one per token) is
// computed once and shared by the heads (RotateBy), the same bits as
// RoPE.Apply per row for 1/heads of the sines and cosines. Values, which
// need no table, go head by head.
func decodeLowRank(dst, src []byte, d Desc) error {
	l, err := parseLowRank(src, d)
	if err != nil {
		return err
	}
	w := lowRankPool.Get().(*lowRankDecoder)
	defer w.release()
	if err := w.reset(&l, d, src); err != nil {
		return err
	}
	if l.rope == nil { // values: head by head, each head's Vt staying in cache
		for h := range w.heads {
			for t0 := 0; t0 < d.Tokens; t0 += lowRankRows {
				if err := w.rows(dst, h, t0, min(lowRankRows, d.Tokens-t0)); err != nil {
					return err
				}
			}
		}
		return nil
	}
	for t0 := 0; t0 < d.Tokens; t0 += lowRankRows {
		n := min(lowRankRows, d.Tokens-t0)
		w.cs = w.cs[:0]
		for i := range n {
			w.cs = l.rope.AppendCosSin(w.cs, int64(t0+i), true)
		}
		for h := range w.heads {
			if err := w.rows(dst, h, t0, n); err != nil {
				return err
			}
		}
	}
	return nil
}

// lowRankHead is one head's checked factors: its encoding b (layout fl)
// and its S and Vt in f32.
type lowRankHead struct {
	b     []byte
	fl    reconstruct.FactorLayout
	s, vt []float32
}

// lowRankDecoder holds one Decode's scratch: every head's S and Vt (in
// sv), a batch of rows of U and of output, and the batch's rotation table.
// Decoders are pooled (lowRankPool): a cold load decodes one chunk per
// layer, K and V, and their scratch is the same size every time.
type lowRankDecoder struct {
	l          *lowRankLayout
	d          Desc
	heads      []lowRankHead
	u, out, sv []float32
	cs         []float32
}

var lowRankPool = sync.Pool{New: func() any { return new(lowRankDecoder) }}

// release drops w's references into the chunk (its source may be a
// mapping about to be unmapped, or a buffer to be freed) and returns w to
// the pool.
func (w *lowRankDecoder) release() {
	clear(w.heads)
	w.l = nil
	lowRankPool.Put(w)
}

// lowRankGrow returns b with length n, reallocated only when too short;
// every element is overwritten before it is read.
func lowRankGrow(b []float32, n int) []float32 {
	if cap(b) < n {
		return make([]float32, n)
	}
	return b[:n]
}

// reset readies w for one chunk: it checks every head's factor encoding
// against the chunk's layout and decodes its S and Vt (src's length was
// checked, so the scratch is bounded by it: at most 2x its bytes for
// f16/bf16 factors).
func (w *lowRankDecoder) reset(l *lowRankLayout, d Desc, src []byte) error {
	c := format.CodecLowRank
	rows := min(d.Tokens, lowRankRows)
	w.l, w.d = l, d
	if cap(w.heads) < d.Heads {
		w.heads = make([]lowRankHead, d.Heads)
	}
	w.heads = w.heads[:d.Heads]
	w.u, w.out = lowRankGrow(w.u, rows*l.maxRank), lowRankGrow(w.out, rows*d.HeadDim)
	if l.rope != nil {
		w.cs = lowRankGrow(w.cs, rows*l.rope.Rotary())[:0]
	}
	var total int
	for h := range d.Heads {
		total += lowRankRank(src, h) * (1 + d.HeadDim)
	}
	w.sv = lowRankGrow(w.sv, total)
	sv := w.sv
	off := lowRankHeader + 2*d.Heads
	for h := range d.Heads {
		fl := lowRankFactorLayout(d, lowRankRank(src, h), l.fdt)
		b := src[off : off+fl.Size()]
		off += fl.Size()
		got, err := reconstruct.ParseFactorLayout(b)
		if err != nil {
			return corrupt(c, d, "head %d: %v", h, err)
		}
		if got != fl {
			return corrupt(c, d, "head %d: factors of %dx%d rank %d %v, want %dx%d rank %d %v",
				h, got.Rows, got.Cols, got.Rank, got.DType, fl.Rows, fl.Cols, fl.Rank, fl.DType)
		}
		r := fl.Rank
		hd := lowRankHead{b: b, fl: fl, s: sv[:r:r], vt: sv[r : r+r*d.HeadDim : r+r*d.HeadDim]}
		sv = sv[r+r*d.HeadDim:]
		if err := format.ToF32(hd.s, b[fl.SOffset():fl.VtOffset()], fl.DType); err != nil {
			return corrupt(c, d, "head %d: %v", h, err)
		}
		if err := format.ToF32(hd.vt, b[fl.VtOffset():fl.Size()], fl.DType); err != nil {
			return corrupt(c, d, "head %d: %v", h, err)
		}
		for i, s := range hd.s {
			if !(s >= 0) || isInf(s) {
				return corrupt(c, d, "head %d: singular value %d is %v", h, i, s)
			}
		}
		w.heads[h] = hd
	}
	return nil
}

// rows reconstructs rows [t0, t0+n) of head h into dst, keys rotated by
// the batch's table.
func (w *lowRankDecoder) rows(dst []byte, h, t0, n int) error {
	c, d, hd := format.CodecLowRank, w.d, &w.heads[h]
	r, dim, e := hd.fl.Rank, hd.fl.Cols, hd.fl.DType.Size()
	f := reconstruct.Factors{Rows: n, Cols: dim, Rank: r, U: w.u[:n*r], S: hd.s, Vt: hd.vt}
	at := hd.fl.UOffset() + t0*r*e
	if err := format.ToF32(f.U, hd.b[at:at+n*r*e], hd.fl.DType); err != nil {
		return corrupt(c, d, "head %d: %v", h, err)
	}
	out := w.out[:n*dim]
	if err := reconstruct.ReconstructInto(out, &f, nil, nil, nil); err != nil {
		return corrupt(c, d, "head %d: %v", h, err)
	}
	if rope := w.l.rope; rope != nil {
		rot := rope.Rotary()
		for i := range n {
			rope.RotateBy(out[i*dim:(i+1)*dim], w.cs[i*rot:(i+1)*rot])
		}
	}
	lim := finiteLimit(d.DType)
	for i, v := range out {
		if !(abs32(v) < lim) {
			return corrupt(c, d, "head %d token %d: reconstructs to %v, not finite in %v", h, t0+i/dim, v, d.DType)
		}
	}
	rowBytes := dim * d.DType.Size()
	at = (h*d.Tokens + t0) * rowBytes
	if err := format.FromF32(dst[at:at+n*rowBytes], out, d.DType); err != nil {
		return corrupt(c, d, "head %d: %v", h, err)
	}
	return nil
}
