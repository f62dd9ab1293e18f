//go:build amd64 && !purego

package codec

import (
	"unsafe"

	"golang.org/x/sys/cpu"

	"github.com/kvstore/kvstore/format"
)

// quantAVX2 says whether the AVX2 kernels of quant_amd64.s can run (F16C,
// for f16 parameters and outputs, comes with every AVX2 CPU but is checked
// too).
var quantAVX2 = cpu.X86.HasAVX2 && cpu.X86.HasF16C

// The kernels of quant_amd64.s: n rows of m channels with per-channel
// parameters, or n groups of m elements with per-group parameters; m is a
// multiple of 8.

//go:noescape
func dqRowsInt8BF16(dst, codes unsafe.Pointer, sc, of *float32, n, m int)

//go:noescape
func dqRowsInt8F16(dst, codes unsafe.Pointer, sc, of *float32, n, m int)

//go:noescape
func dqRowsInt8F32(dst, codes unsafe.Pointer, sc, of *float32, n, m int)

//go:noescape
func dqRowsInt4BF16(dst, codes unsafe.Pointer, sc, of *float32, n, m int)

//go:noescape
func dqRowsInt4F16(dst, codes unsafe.Pointer, sc, of *float32, n, m int)

//go:noescape
func dqRowsInt4F32(dst, codes unsafe.Pointer, sc, of *float32, n, m int)

//go:noescape
func dqGroupsInt8BF16(dst, codes unsafe.Pointer, sc, of *float32, n, m int)

//go:noescape
func dqGroupsInt8F16(dst, codes unsafe.Pointer, sc, of *float32, n, m int)

//go:noescape
func dqGroupsInt8F32(dst, codes unsafe.Pointer, sc, of *float32, n, m int)

//go:noescape
func dqGroupsInt4BF16(dst, codes unsafe.Pointer, sc, of *float32, n, m int)

//go:noescape
func dqGroupsInt4F16(dst, codes unsafe.Pointer, sc, of *float32, n, m int)

//go:noescape
func dqGroupsInt4F32(dst, codes unsafe.Pointer, sc, of *float32, n, m int)

//go:noescape
func dqParamsF16(sc, of *float32, s, o unsafe.Pointer, n int, qmax, lim float32) bool

//go:noescape
func dqParamsF32(sc, of *float32, s, o unsafe.Pointer, n int, qmax, lim float32) bool

// dequantFast decodes n runs of m elements starting at element e of data
// into out, which starts at that element: rows with per-channel parameters
// sc[:m] and of[:m] when groups is false, groups with per-group ones
// sc[:n] and of[:n] when true. It returns false, writing nothing, where no
// kernel fits: m not a multiple of 8, or int4 codes starting mid-byte.
// Callers use it only when quantAVX2 is true. Lengths are checked by
// slicing, so a caller's slip panics rather than touching memory out of
// bounds.
func dequantFast(out, data []byte, e, n, m, bits int, sc, of []float32, dt format.DType, groups bool) bool {
	if n < 1 || m < 8 || m%8 != 0 || (bits == 4 && e%2 != 0) {
		return false
	}
	elems := n * m
	out = out[:elems*dt.Size()]
	if bits == 8 {
		data = data[e : e+elems]
	} else {
		data = data[e/2 : (e+elems)/2]
	}
	np := m
	if groups {
		np = n
	}
	sc, of = sc[:np], of[:np]
	// Direct calls, not a table: an indirect call would make the buffers
	// escape.
	o, c, s, f := unsafe.Pointer(&out[0]), unsafe.Pointer(&data[0]), &sc[0], &of[0]
	switch {
	case !groups && bits == 8 && dt == format.DTypeBF16:
		dqRowsInt8BF16(o, c, s, f, n, m)
	case !groups && bits == 8 && dt == format.DTypeF16:
		dqRowsInt8F16(o, c, s, f, n, m)
	case !groups && bits == 8:
		dqRowsInt8F32(o, c, s, f, n, m)
	case !groups && dt == format.DTypeBF16:
		dqRowsInt4BF16(o, c, s, f, n, m)
	case !groups && dt == format.DTypeF16:
		dqRowsInt4F16(o, c, s, f, n, m)
	case !groups:
		dqRowsInt4F32(o, c, s, f, n, m)
	case bits == 8 && dt == format.DTypeBF16:
		dqGroupsInt8BF16(o, c, s, f, n, m)
	case bits == 8 && dt == format.DTypeF16:
		dqGroupsInt8F16(o, c, s, f, n, m)
	case bits == 8:
		dqGroupsInt8F32(o, c, s, f, n, m)
	case dt == format.DTypeBF16:
		dqGroupsInt4BF16(o, c, s, f, n, m)
	case dt == format.DTypeF16:
		dqGroupsInt4F16(o, c, s, f, n, m)
	default:
		dqGroupsInt4F32(o, c, s, f, n, m)
	}
	return true
}

// paramsFast widens the n scales and offsets starting at parameter i of
// the chunk src laid out by l into sc and of, and reports whether every
// pair passes validParams for dt. False (sc and of then unspecified) also
// where no kernel fits: n not a positive multiple of 8. On false the
// caller reads them one by one, so the SIMD check only ever saves work.
// Callers use it only when quantAVX2 is true.
func paramsFast(l *quantLayout, src []byte, i, n int, sc, of []float32, dt format.DType) bool {
	if n < 8 || n%8 != 0 {
		return false
	}
	sc, of = sc[:n], of[:n]
	size := l.sdt.Size()
	s := src[l.scalesAt()+i*size : l.scalesAt()+(i+n)*size]
	o := src[l.offsetsAt()+i*size : l.offsetsAt()+(i+n)*size]
	if l.sdt == format.DTypeF16 {
		return dqParamsF16(&sc[0], &of[0], unsafe.Pointer(&s[0]), unsafe.Pointer(&o[0]), n, l.qmax, finiteLimit(dt))
	}
	return dqParamsF32(&sc[0], &of[0], unsafe.Pointer(&s[0]), unsafe.Pointer(&o[0]), n, l.qmax, finiteLimit(dt))
}
