package assemble

import (
	"encoding/binary"
	"fmt"
	"unsafe"

	"github.com/kvstore/kvstore/format"
)

// fillTransposed places the values of chunk i of packet p into a
// format.KVLayoutTransposedV V buffer, [kv_heads*head_dim][tokens]: each
// head's rows in runs of tokens, every run scattered a few dimensions at
// a time (scatterTransposed) so that the writes within a destination row
// are sequential. A raw
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
	hd, T := g.rowDim(), g.tokens
	switch es := g.esize; {
	case !littleEndian && (es == 2 || es == 4):
		scatterElements(dst, src, es, h, t0, k, hd, T)
	case es == 4:
		scatter32(dst, src, h, t0, k, hd, T)
	case es == 2:
		scatter16(dst, src, h, t0, k, hd, T)
	default:
		panic(fmt.Sprintf("assemble: transposed layout of %d-byte elements", es)) // Validate allows f32, f16, bf16 only
	}
}

// scatterTile is the tokens transposed at a time: a tile of source rows
// (scatterTile x head_dim elements) stays in L1 while each dimension's
// run of scatterTile values is written.
const scatterTile = 32

// scatter16 is scatterTransposed of 2-byte elements. Blocks of 4 tokens x
// 4 dimensions are transposed in registers: four 8-byte loads (4
// dimensions of a token each), shifts and masks, four 8-byte stores (4
// tokens of a dimension each), instead of 16 element loads and stores,
// which took a third of a restore's fill. Tokens and dimensions past the
// last whole block go one element at a time.
func scatter16(dst, src []byte, h, t0, k, hd, T int) {
	const lo16, lo32 = 0x0000ffff0000ffff, 0x00000000ffffffff
	sp, dp := checkScatter(dst, src, 2, h, t0, k, hd, T)
	d4 := hd &^ 3
	for a := 0; a < k; a += scatterTile {
		n := min(scatterTile, k-a)
		n4 := n &^ 3
		for d := 0; d < d4; d += 4 {
			o := ((h*hd+d)*T + t0 + a) * 2 // row d's first token of the tile
			for t := 0; t < n4; t += 4 {
				s := ((a+t)*hd + d) * 2
				r0 := load64(sp, s)
				r1 := load64(sp, s+hd*2)
				r2 := load64(sp, s+hd*4)
				r3 := load64(sp, s+hd*6)
				// [x0 y0 x2 y2] and [x1 y1 x3 y3] of pairs of tokens.
				e01 := r0&lo16 | (r1&lo16)<<16
				o01 := r0>>16&lo16 | r1&^lo16
				e23 := r2&lo16 | (r3&lo16)<<16
				o23 := r2>>16&lo16 | r3&^lo16
				store64(dp, o+t*2, e01&lo32|e23<<32)
				store64(dp, o+T*2+t*2, o01&lo32|o23<<32)
				store64(dp, o+T*4+t*2, e01>>32|e23&^lo32)
				store64(dp, o+T*6+t*2, o01>>32|o23&^lo32)
			}
			for t := n4; t < n; t++ {
				s := ((a+t)*hd + d) * 2
				for i := range 4 {
					copy(dst[o+(i*T+t)*2:o+(i*T+t)*2+2], src[s+i*2:s+i*2+2])
				}
			}
		}
		for d := d4; d < hd; d++ {
			o := ((h*hd+d)*T + t0 + a) * 2
			for t := range n {
				s := ((a+t)*hd + d) * 2
				copy(dst[o+t*2:o+t*2+2], src[s:s+2])
			}
		}
	}
}

// scatter32 is scatterTransposed of 4-byte elements, in blocks of 2
// tokens x 2 dimensions transposed in registers as scatter16's are.
func scatter32(dst, src []byte, h, t0, k, hd, T int) {
	const lo32 = 0x00000000ffffffff
	sp, dp := checkScatter(dst, src, 4, h, t0, k, hd, T)
	d2 := hd &^ 1
	for a := 0; a < k; a += scatterTile {
		n := min(scatterTile, k-a)
		n2 := n &^ 1
		for d := 0; d < d2; d += 2 {
			o := ((h*hd+d)*T + t0 + a) * 4
			for t := 0; t < n2; t += 2 {
				s := ((a+t)*hd + d) * 4
				r0 := load64(sp, s)
				r1 := load64(sp, s+hd*4)
				store64(dp, o+t*4, r0&lo32|r1<<32)
				store64(dp, o+T*4+t*4, r0>>32|r1&^lo32)
			}
			if n2 < n {
				s := ((a+n2)*hd + d) * 4
				copy(dst[o+n2*4:o+n2*4+4], src[s:s+4])
				copy(dst[o+(T+n2)*4:o+(T+n2)*4+4], src[s+4:s+8])
			}
		}
		if d2 < hd {
			o := ((h*hd+d2)*T + t0 + a) * 4
			for t := range n {
				s := ((a+t)*hd + d2) * 4
				copy(dst[o+t*4:o+t*4+4], src[s:s+4])
			}
		}
	}
}

// checkScatter checks that src holds k rows of hd elements of es bytes and
// that dst holds head h's rows of T tokens, so that the loads and stores
// of a scatter of tokens [t0, t0+k) need no bounds checks, and returns
// their first bytes. A failure is a bug: the destination was checked.
func checkScatter(dst, src []byte, es, h, t0, k, hd, T int) (sp, dp unsafe.Pointer) {
	if len(src) < k*hd*es || t0+k > T || len(dst) < (h+1)*hd*T*es {
		panic(fmt.Sprintf("assemble: scatter of %d tokens at %d of %d: %d source and %d destination bytes", k, t0, T, len(src), len(dst)))
	}
	return unsafe.Pointer(unsafe.SliceData(src)), unsafe.Pointer(unsafe.SliceData(dst))
}

// load64 and store64 are a little-endian 8-byte load and store at byte
// off of p (amd64 and arm64, both little endian, allow them unaligned).
func load64(p unsafe.Pointer, off int) uint64 { return *(*uint64)(unsafe.Add(p, off)) }

func store64(p unsafe.Pointer, off int, v uint64) { *(*uint64)(unsafe.Add(p, off)) = v }

// littleEndian: the in-register transposes of scatter16 and scatter32 take
// element 0 of an 8-byte load to be its low bits.
var littleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// scatterElements is scatterTransposed one element at a time, for a
// big-endian machine.
func scatterElements(dst, src []byte, es, h, t0, k, hd, T int) {
	for t := range k {
		for d := range hd {
			o := ((h*hd+d)*T + t0 + t) * es
			copy(dst[o:o+es], src[(t*hd+d)*es:(t*hd+d+1)*es])
		}
	}
}
