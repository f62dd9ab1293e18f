package codec

import (
	"encoding/binary"
	"math"

	"github.com/kvstore/kvstore/format"
)

// The portable row and group kernels of the int8/int4 codecs: a row is the
// head_dim elements of one (head, token), with per-element scales and
// offsets (a key row); a group is a stretch of a value row with one scale
// and offset. quant_amd64.s holds their AVX2 counterparts, which must stay
// bit-identical to them.

// unpackCodes returns the codes of elements [base, base+len(codes)) of
// data: the bytes themselves for int8, nibbles unpacked into codes for int4.
func unpackCodes(codes, data []byte, base, bits int) []byte {
	n := len(codes)
	if bits == 8 {
		return data[base : base+n]
	}
	i := 0
	if base%2 == 1 {
		codes[0] = data[base/2] >> 4
		i = 1
	}
	in := data[(base+i)/2:]
	for ; i+8 <= n; i += 8 { // eight nibbles at a time
		binary.LittleEndian.PutUint64(codes[i:], spreadNibbles(binary.LittleEndian.Uint32(in)))
		in = in[4:]
	}
	for ; i+1 < n; i += 2 {
		codes[i], codes[i+1] = in[0]&0xf, in[0]>>4
		in = in[1:]
	}
	if i < n {
		codes[i] = in[0] & 0xf
	}
	return codes
}

// spreadNibbles puts nibble k of x (low nibble first) in byte k.
func spreadNibbles(x uint32) uint64 {
	y := uint64(x)
	y = (y | y<<16) & 0x0000ffff0000ffff
	y = (y | y<<8) & 0x00ff00ff00ff00ff
	return y&0x000f000f000f000f | (y>>4&0x000f000f000f000f)<<8
}

// packCodes writes codes as elements [base, base+len(codes)) of zeroed
// data.
func packCodes(data, codes []byte, base, bits int) {
	if bits == 8 {
		copy(data[base:], codes)
		return
	}
	for i, q := range codes {
		data[(base+i)>>1] |= q << (4 * ((base + i) & 1))
	}
}

// dequantRow decodes one row of codes with per-element scales and offsets
// (a key row) into out, rounding to dt to nearest even.
func dequantRow(out, codes []byte, sc, of []float32, dt format.DType) {
	n := len(codes)
	sc, of = sc[:n], of[:n]
	switch dt {
	case format.DTypeBF16:
		out = out[:2*n]
		c := 0
		for ; c+4 <= n; c += 4 {
			binary.LittleEndian.PutUint64(out[2*c:], uint64(toBF16(dequant(float32(codes[c]), sc[c], of[c])))|
				uint64(toBF16(dequant(float32(codes[c+1]), sc[c+1], of[c+1])))<<16|
				uint64(toBF16(dequant(float32(codes[c+2]), sc[c+2], of[c+2])))<<32|
				uint64(toBF16(dequant(float32(codes[c+3]), sc[c+3], of[c+3])))<<48)
		}
		for ; c < n; c++ {
			binary.LittleEndian.PutUint16(out[2*c:], toBF16(dequant(float32(codes[c]), sc[c], of[c])))
		}
	case format.DTypeF16:
		out = out[:2*n]
		for c, q := range codes {
			binary.LittleEndian.PutUint16(out[2*c:], format.F32ToF16(dequant(float32(q), sc[c], of[c])))
		}
	default:
		out = out[:4*n]
		for c, q := range codes {
			binary.LittleEndian.PutUint32(out[4*c:], math.Float32bits(dequant(float32(q), sc[c], of[c])))
		}
	}
}

// dequantGroup decodes the codes of one group with scale s and offset o (a
// stretch of a value row) into out, rounding to dt to nearest even.
func dequantGroup(out, codes []byte, s, o float32, dt format.DType) {
	n := len(codes)
	switch dt {
	case format.DTypeBF16:
		out = out[:2*n]
		c := 0
		for ; c+4 <= n; c += 4 {
			binary.LittleEndian.PutUint64(out[2*c:], uint64(toBF16(dequant(float32(codes[c]), s, o)))|
				uint64(toBF16(dequant(float32(codes[c+1]), s, o)))<<16|
				uint64(toBF16(dequant(float32(codes[c+2]), s, o)))<<32|
				uint64(toBF16(dequant(float32(codes[c+3]), s, o)))<<48)
		}
		for ; c < n; c++ {
			binary.LittleEndian.PutUint16(out[2*c:], toBF16(dequant(float32(codes[c]), s, o)))
		}
	case format.DTypeF16:
		out = out[:2*n]
		for c, q := range codes {
			binary.LittleEndian.PutUint16(out[2*c:], format.F32ToF16(dequant(float32(q), s, o)))
		}
	default:
		out = out[:4*n]
		for c, q := range codes {
			binary.LittleEndian.PutUint32(out[4*c:], math.Float32bits(dequant(float32(q), s, o)))
		}
	}
}

// dequantNibbles decodes the n int4 codes of elements [e, e+n) of data
// with scale s and offset o into out, rounding to dt to nearest even, as
// dequantGroup would: each of the 16 codes is dequantized and rounded once,
// into a table, and each byte of codes then writes two elements.
func dequantNibbles(out, data []byte, e, n int, s, o float32, dt format.DType) {
	var tab [16]uint64
	for q := range tab {
		v := dequant(float32(q), s, o)
		switch dt {
		case format.DTypeBF16:
			tab[q] = uint64(toBF16(v))
		case format.DTypeF16:
			tab[q] = uint64(format.F32ToF16(v))
		default:
			tab[q] = uint64(math.Float32bits(v))
		}
	}
	if dt == format.DTypeF32 {
		out = out[:4*n]
		for i := range n {
			binary.LittleEndian.PutUint32(out[4*i:], uint32(tab[data[(e+i)/2]>>(4*((e+i)&1))&0xf]))
		}
		return
	}
	out = out[:2*n]
	i := 0
	if e%2 == 1 {
		binary.LittleEndian.PutUint16(out, uint16(tab[data[e/2]>>4]))
		i = 1
	}
	in := data[(e+i)/2:]
	for ; i+8 <= n; i += 8 { // four bytes, eight elements
		w := binary.LittleEndian.Uint32(in)
		binary.LittleEndian.PutUint64(out[2*i:], tab[w&0xf]|tab[w>>4&0xf]<<16|tab[w>>8&0xf]<<32|tab[w>>12&0xf]<<48)
		binary.LittleEndian.PutUint64(out[2*i+8:], tab[w>>16&0xf]|tab[w>>20&0xf]<<16|tab[w>>24&0xf]<<32|tab[w>>28]<<48)
		in = in[4:]
	}
	for ; i+2 <= n; i += 2 {
		binary.LittleEndian.PutUint32(out[2*i:], uint32(tab[in[0]&0xf]|tab[in[0]>>4]<<16))
		in = in[1:]
	}
	if i < n {
		binary.LittleEndian.PutUint16(out[2*i:], uint16(tab[in[0]&0xf]))
	}
}

// toBF16 is format.F32ToBF16 for the finite values a checked chunk
// decodes to: round to nearest even, no NaN case.
func toBF16(v float32) uint16 {
	b := math.Float32bits(v)
	b += 0x7fff + (b>>16)&1
	return uint16(b >> 16)
}

// quantRow writes the codes of one row of finite values x with
// per-element groups g into codes: round((x-o)/s) clamped to [0, qmax].
func quantRow(codes []byte, x []float32, g []groupQuant, qmax float32) {
	n := len(x)
	codes, g = codes[:n], g[:n]
	for c, v := range x {
		gc := &g[c]
		f := (v - gc.o) * gc.inv
		if gc.div {
			f = (v - gc.o) / gc.s
		}
		codes[c] = uint8(int32(min(max(f+0.5, 0), qmax)))
	}
}
