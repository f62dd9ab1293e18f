package assemble

import (
	"fmt"
	"unsafe"

	"github.com/kvstore/kvstore/format"
)

// fillTransposed places the values of chunk i of packet p into a
// format.KVLayoutTransposedV V buffer, [kv_heads*head_dim][tokens]: each
// head's rows in runs of tokens, every run scattered one dimension at a
// time so that the writes within a destination row are sequential. A raw
// chunk streams as fillPaged's do (verified whole when mapped, CRC'd on
// the way when not); a compressed or pruned one is verified whole, decoded
// into scratch and its selected rows scattered.
func (a *Assembly) fillTransposed(w *worker, g *geom, dst []byte, p *packet, i int) error {
	if p.sel != nil || p.h.Chunks[i].Codec != format.CodecRaw {
		return a.fillTransposedWhole(w, g, dst, p, i)
	}
	s, err := a.source(w, p, i, g.rowBytes)
	if err != nil {
		return err
	}
	run := max(1, min(s.n, scratch/g.rowBytes))
	for h := range g.heads {
		for t0 := 0; t0 < s.n; t0 += run {
			k := min(run, s.n-t0)
			var rd []byte
			if s.mapped == nil {
				rd = w.buf(&w.rd, k*g.rowBytes)
			}
			src, err := s.rows(h, t0, k, rd)
			if err != nil {
				return err
			}
			scatterTransposed(g, dst, src, h, p.Row+t0, k)
		}
	}
	return s.done()
}

// fillTransposedWhole is fillTransposed for a chunk that must be read
// whole: compressed, or placed through a keep-set (p.sel).
func (a *Assembly) fillTransposedWhole(w *worker, g *geom, dst []byte, p *packet, i int) error {
	b, err := w.wholeChunk(p, i)
	if err != nil {
		return err
	}
	n, rb := int(p.h.Rows()), g.rowBytes
	for h := range g.heads {
		if p.sel == nil {
			scatterTransposed(g, dst, b[h*n*rb:(h+1)*n*rb], h, p.Row, n)
			continue
		}
		for j, t := range p.sel[i/2*g.heads+h] {
			scatterTransposed(g, dst, b[(h*n+int(t))*rb:(h*n+int(t)+1)*rb], h, p.Row+j, 1)
		}
	}
	return nil
}

// rowDim is the elements of one row (head_dim).
func (g *geom) rowDim() int { return g.rowBytes / g.esize }

// scatterTransposed writes k rows of head h (token-major, head_dim
// elements each) as tokens [t0, t0+k) of the transposed buffer dst.
func scatterTransposed(g *geom, dst, src []byte, h, t0, k int) {
	es := g.esize
	hd, T := g.rowDim(), g.tokens
	switch es {
	case 4:
		d := unsafe.Slice((*uint32)(unsafe.Pointer(unsafe.SliceData(dst))), len(dst)/4)
		s := unsafe.Slice((*uint32)(unsafe.Pointer(unsafe.SliceData(src))), k*hd)
		scatterLoop(d, s, h, t0, k, hd, T)
	case 2:
		d := unsafe.Slice((*uint16)(unsafe.Pointer(unsafe.SliceData(dst))), len(dst)/2)
		s := unsafe.Slice((*uint16)(unsafe.Pointer(unsafe.SliceData(src))), k*hd)
		scatterLoop(d, s, h, t0, k, hd, T)
	default:
		panic(fmt.Sprintf("assemble: transposed layout of %d-byte elements", es)) // Validate allows f32, f16, bf16 only
	}
}

// scatterTile is the tokens transposed at a time: a tile of source rows
// (scatterTile x head_dim elements) stays in L1 while each dimension's
// run of scatterTile values is written.
const scatterTile = 32

func scatterLoop[E uint16 | uint32](dst, src []E, h, t0, k, hd, T int) {
	for a := 0; a < k; a += scatterTile {
		n := min(scatterTile, k-a)
		tile := src[a*hd : (a+n)*hd]
		for d := range hd {
			o := (h*hd+d)*T + t0 + a
			out := dst[o : o+n]
			for t := range out {
				out[t] = tile[t*hd+d]
			}
		}
	}
}
