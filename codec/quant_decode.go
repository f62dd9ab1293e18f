package codec

import (
	"encoding/binary"

	"github.com/kvstore/kvstore/format"
)

// parseQuant checks an int8/int4 chunk's header and size and returns its
// layout.
func parseQuant(src []byte, c format.Codec, d Desc) (quantLayout, error) {
	if len(src) < quantHeader {
		return quantLayout{}, corrupt(c, d, "%d bytes, shorter than its header", len(src))
	}
	bits, sdt, group, axis := int(src[0]), format.DType(src[1]), int(binary.LittleEndian.Uint16(src[2:])), src[4]
	wantBits := 8
	if c == format.CodecInt4 {
		wantBits = 4
	}
	switch {
	case bits != wantBits:
		return quantLayout{}, corrupt(c, d, "header says %d bits", bits)
	case sdt != format.DTypeF16 && sdt != format.DTypeF32:
		return quantLayout{}, corrupt(c, d, "parameter dtype %v is not f16 or f32", sdt)
	case group < 1:
		return quantLayout{}, corrupt(c, d, "group size 0")
	case axis != axisTokens && axis != axisChannels:
		return quantLayout{}, corrupt(c, d, "axis %d is neither tokens (1) nor channels (2)", axis)
	case src[5] != 0 || src[6] != 0 || src[7] != 0:
		return quantLayout{}, corrupt(c, d, "reserved header bytes % x are not zero", src[5:8])
	}
	l := newQuantLayoutAxis(c, d, group, sdt, axis)
	if len(src) != l.size() {
		return quantLayout{}, corrupt(c, d, "%d bytes, header and shape give %d", len(src), l.size())
	}
	if l.bits == 4 && d.Elems()%2 == 1 && src[len(src)-1]>>4 != 0 {
		return quantLayout{}, corrupt(c, d, "padding nibble after the last code is %#x, not 0", src[len(src)-1]>>4)
	}
	return l, nil
}

// decodeQuant decodes an int8/int4 chunk: its parameters checked and
// widened a block at a time, its codes dequantized by the SIMD kernels of
// quant_amd64.s where the CPU and the shape allow, by the portable row and
// group kernels elsewhere, with bit-identical results.
func decodeQuant(dst, src []byte, c format.Codec, d Desc) error {
	return decodeQuantWith(dst, src, c, d, quantAVX2)
}

// paramBlock is how many value-group parameters are read and checked at a
// time, at least: the scratch holds max(head_dim, paramBlock) scales and
// as many offsets.
const paramBlock = 256

// decodeQuantWith is decodeQuant with the SIMD kernels on or off (tests
// compare the two).
func decodeQuantWith(dst, src []byte, c format.Codec, d Desc, simd bool) error {
	l, err := parseQuant(src, c, d)
	if err != nil {
		return err
	}
	// Scratch on the stack: no allocation up to head_dim 256.
	var buf [2 * paramBlock]float32
	var codes [paramBlock]byte
	scratch := buf[:]
	q := dequantizer{l: &l, src: src, data: src[l.dataAt():], dst: dst, d: d, c: c, simd: simd, codes: codes[:]}
	if l.dim > paramBlock {
		scratch = make([]float32, 2*l.dim)
		if l.bits == 4 && l.axis == axisTokens {
			q.codes = make([]byte, l.dim)
		}
	}
	n := len(scratch) / 2
	q.sc, q.of = scratch[:n:n], scratch[n:]
	if l.axis == axisTokens {
		return q.decodeTokens()
	}
	return q.decodeChannels()
}

// dequantizer writes one chunk's tensor into dst, a group of rows or a
// block of groups at a time.
type dequantizer struct {
	l      *quantLayout
	src    []byte // the whole chunk
	data   []byte // its codes
	dst    []byte
	d      Desc
	c      format.Codec
	simd   bool      // use the SIMD kernels where they fit
	codes  []byte    // one key row's unpacked int4 codes
	sc, of []float32 // a key group's channel parameters, or a block of value groups'
}

// decodeTokens decodes a chunk grouped along tokens: each group's head_dim
// scales and offsets are read and checked once, then used for its G rows,
// which lie one after another.
func (q *dequantizer) decodeTokens() error {
	l := q.l
	dim, size := l.dim, q.d.DType.Size()
	for h := range l.heads {
		for g := range l.ngroups {
			if err := q.params((h*l.ngroups+g)*dim, dim); err != nil {
				return err
			}
			t0, t1 := g*l.group, min((g+1)*l.group, l.tokens)
			e := (h*l.tokens + t0) * dim
			if q.simd && dequantFast(q.dst[e*size:], q.data, e, t1-t0, dim, l.bits, q.sc[:dim], q.of[:dim], q.d.DType, false) {
				continue
			}
			for t := t0; t < t1; t++ {
				q.row((h*l.tokens + t) * dim)
			}
		}
	}
	return nil
}

// decodeChannels decodes a chunk grouped along head_dim, a block of rows
// (and their groups' parameters) at a time. Where the groups tile each row
// (G divides head_dim, or G >= head_dim: one group a row) they follow one
// another through the whole block; otherwise each row is its full groups
// and one short one.
func (q *dequantizer) decodeChannels() error {
	l := q.l
	dim, ng, rows := l.dim, l.ngroups, l.heads*l.tokens
	group := min(l.group, dim)
	full, last := dim/group, dim%group
	blk := len(q.sc) / ng // rows a block: len(q.sc) >= dim >= ng
	for r0 := 0; r0 < rows; r0 += blk {
		nr := min(blk, rows-r0)
		if err := q.params(r0*ng, nr*ng); err != nil {
			return err
		}
		if last == 0 {
			q.groups(r0*dim, nr*ng, group, q.sc, q.of)
			continue
		}
		for r := range nr {
			sc, of := q.sc[r*ng:(r+1)*ng], q.of[r*ng:(r+1)*ng]
			e := (r0 + r) * dim
			q.groups(e, full, group, sc, of)
			q.groups(e+full*group, 1, last, sc[full:], of[full:])
		}
	}
	return nil
}

// groups decodes n groups of m elements starting at element e, group j
// with scale sc[j] and offset of[j].
func (q *dequantizer) groups(e, n, m int, sc, of []float32) {
	size := q.d.DType.Size()
	if q.simd && dequantFast(q.dst[e*size:], q.data, e, n, m, q.l.bits, sc[:n], of[:n], q.d.DType, true) {
		return
	}
	for j := range n {
		if q.l.bits == 4 {
			dequantNibbles(q.dst[(e+j*m)*size:], q.data, e+j*m, m, sc[j], of[j], q.d.DType)
		} else {
			dequantGroup(q.dst[(e+j*m)*size:], q.data[e+j*m:e+(j+1)*m], sc[j], of[j], q.d.DType)
		}
	}
}

// params reads and checks parameters [i, i+n) into q.sc and q.of: eight at
// a time with SIMD, then (or, on a bad one, again) one by one, so that an
// error names the first bad parameter.
func (q *dequantizer) params(i, n int) error {
	k := 0
	if q.simd && n >= 8 && paramsFast(q.l, q.src, i, n&^7, q.sc, q.of, q.d.DType) {
		k = n &^ 7
	}
	for ; k < n; k++ {
		if err := q.param(i+k, &q.sc[k], &q.of[k]); err != nil {
			return err
		}
	}
	return nil
}

// param reads and checks parameter i.
func (q *dequantizer) param(i int, s, o *float32) error {
	*s = q.l.param(q.src, q.l.scalesAt(), i)
	*o = q.l.param(q.src, q.l.offsetsAt(), i)
	if !validParams(*s, *o, q.l.qmax, q.d.DType) {
		return corrupt(q.c, q.d, "group %d: scale %v, offset %v: not finite, negative, or beyond %v", i, *s, *o, q.d.DType)
	}
	return nil
}

// row decodes the row starting at element base into dst with the
// parameters in q.sc and q.of.
func (q *dequantizer) row(base int) {
	l := q.l
	var codes []byte
	if l.bits == 4 {
		codes = unpackCodes(q.codes[:l.dim], q.data, base, 4)
	} else {
		codes = q.data[base : base+l.dim]
	}
	dequantRow(q.dst[base*q.d.DType.Size():], codes, q.sc[:l.dim], q.of[:l.dim], q.d.DType)
}
