package codec

import (
	"encoding/binary"
	"math"

	"github.com/kvstore/kvstore/format"
)

// Quantization axes, byte 4 of an int8/int4 chunk.
const (
	axisTokens   = 1 // groups of G tokens per (head, channel): KIVI keys
	axisChannels = 2 // groups of G channels per (head, token): KIVI values
)

// quantHeader is the size of an int8/int4 chunk's header.
const quantHeader = 8

// quantLayout is where everything of an int8/int4 chunk lies.
type quantLayout struct {
	bits    int // 8 or 4
	qmax    float32
	sdt     format.DType // of scales and offsets: f16 or f32
	group   int          // G
	axis    uint8
	heads   int
	tokens  int
	dim     int
	ngroups int // groups per column (axisTokens) or per row (axisChannels)
	params  int // P
	data    int // bytes of codes
}

// newQuantLayout lays out a chunk of d under codec c (int8 or int4), groups
// of group elements along the axis d.Kind selects, parameters of type sdt.
func newQuantLayout(c format.Codec, d Desc, group int, sdt format.DType) quantLayout {
	axis := uint8(axisTokens)
	if d.Kind == format.ChunkV {
		axis = axisChannels
	}
	return newQuantLayoutAxis(c, d, group, sdt, axis)
}

func newQuantLayoutAxis(c format.Codec, d Desc, group int, sdt format.DType, axis uint8) quantLayout {
	l := quantLayout{bits: 8, sdt: sdt, group: group, axis: axis, heads: d.Heads, tokens: d.Tokens, dim: d.HeadDim}
	if c == format.CodecInt4 {
		l.bits = 4
	}
	l.qmax = float32(int(1)<<l.bits - 1)
	n := d.Elems()
	if axis == axisTokens {
		l.ngroups = ceilDiv(d.Tokens, group)
		l.params = d.Heads * l.ngroups * d.HeadDim
	} else {
		l.ngroups = ceilDiv(d.HeadDim, group)
		l.params = d.Heads * d.Tokens * l.ngroups
	}
	l.data = n
	if l.bits == 4 {
		l.data = (n + 1) / 2
	}
	return l
}

func (l *quantLayout) scalesAt() int  { return quantHeader }
func (l *quantLayout) offsetsAt() int { return quantHeader + l.params*l.sdt.Size() }
func (l *quantLayout) dataAt() int    { return quantHeader + 2*l.params*l.sdt.Size() }
func (l *quantLayout) size() int      { return l.dataAt() + l.data }

// header is the chunk's first 8 bytes.
func (l *quantLayout) header() []byte {
	h := make([]byte, quantHeader)
	h[0] = byte(l.bits)
	h[1] = byte(l.sdt)
	binary.LittleEndian.PutUint16(h[2:], uint16(l.group))
	h[4] = l.axis
	return h
}

// param reads parameter i of the array starting at at.
func (l *quantLayout) param(b []byte, at, i int) float32 {
	if l.sdt == format.DTypeF16 {
		return halfToF32(binary.LittleEndian.Uint16(b[at+2*i:]))
	}
	return math.Float32frombits(binary.LittleEndian.Uint32(b[at+4*i:]))
}

// halfToF32 is format.F16ToF32 with an inlined path for normal numbers:
// rebias the exponent, widen the mantissa.
func halfToF32(h uint16) float32 {
	if e := h & 0x7c00; e != 0 && e != 0x7c00 {
		return math.Float32frombits(uint32(h&0x8000)<<16 | (uint32(h&0x7fff)+(127-15)<<10)<<13)
	}
	return format.F16ToF32(h)
}

// putParam writes parameter i, which is exact in l.sdt.
func (l *quantLayout) putParam(b []byte, at, i int, v float32) {
	if l.sdt == format.DTypeF16 {
		binary.LittleEndian.PutUint16(b[at+2*i:], format.F32ToF16(v))
		return
	}
	binary.LittleEndian.PutUint32(b[at+4*i:], math.Float32bits(v))
}

// dequant is the one formula every decoder must use: the explicit
// conversion rounds the product, so no platform fuses it into an FMA and
// the decoded bits are the same everywhere. The SIMD kernels of
// quant_amd64.s do the same: a multiply, then an add.
func dequant(q, s, o float32) float32 { return float32(q*s) + o }
