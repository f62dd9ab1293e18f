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

func decodeQuant(dst, src []byte, c format.Codec, d Desc) error {
	l, err := parseQuant(src, c, d)
	if err != nil {
		return err
	}
	q := dequantizer{l: &l, src: src, data: src[l.dataAt():], dst: dst, d: d, c: c,
		codes: make([]byte, l.dim), sc: make([]float32, l.dim), of: make([]float32, l.dim)}
	if l.axis == axisTokens {
		return q.decodeTokens()
	}
	return q.decodeChannels()
}

// dequantizer writes one chunk's tensor into dst, a row at a time.
type dequantizer struct {
	l      *quantLayout
	src    []byte // the whole chunk
	data   []byte // its codes
	dst    []byte
	d      Desc
	c      format.Codec
	codes  []byte    // one row's unpacked int4 codes
	sc, of []float32 // each channel's scale and offset
}

// decodeTokens decodes a chunk grouped along tokens: each group's head_dim
// scales and offsets are read and checked once, then used for its G rows.
func (q *dequantizer) decodeTokens() error {
	l := q.l
	dim := l.dim
	for h := range l.heads {
		for g := range l.ngroups {
			base := (h*l.ngroups + g) * dim
			for c := range dim {
				if err := q.param(base+c, &q.sc[c], &q.of[c]); err != nil {
					return err
				}
			}
			for t := g * l.group; t < min((g+1)*l.group, l.tokens); t++ {
				q.row((h*l.tokens + t) * dim)
			}
		}
	}
	return nil
}

// decodeChannels decodes a chunk grouped along head_dim, row by row and
// group by group.
func (q *dequantizer) decodeChannels() error {
	l := q.l
	dim, size := l.dim, q.d.DType.Size()
	var s, o float32
	for r := range l.heads * l.tokens {
		base := r * dim
		codes := unpackCodes(q.codes, q.data, base, l.bits)
		for j := range l.ngroups {
			if err := q.param(r*l.ngroups+j, &s, &o); err != nil {
				return err
			}
			c0, c1 := j*l.group, min((j+1)*l.group, dim)
			dequantGroup(q.dst[(base+c0)*size:], codes[c0:c1], s, o, q.d.DType)
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

// row decodes the row starting at element base into dst.
func (q *dequantizer) row(base int) {
	size := q.d.DType.Size()
	codes := unpackCodes(q.codes, q.data, base, q.l.bits)
	dequantRow(q.dst[base*size:], codes, q.sc, q.of, q.d.DType)
}
