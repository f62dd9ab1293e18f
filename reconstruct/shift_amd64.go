//go:build amd64 && !purego

package reconstruct

import (
	"unsafe"

	"golang.org/x/sys/cpu"

	"github.com/kvstore/kvstore/format"
)

// shiftAVX2 says whether the AVX2 kernels of shift_amd64.s can run (F16C
// for the f16 conversions comes with every AVX2 CPU, but is checked too).
var shiftAVX2 = cpu.X86.HasAVX2 && cpu.X86.HasF16C

// The kernels rotate rows in place or out of place; n is the pair count per
// row (half) or the rotated dims (pairs). See shift_amd64.s.

//go:noescape
func shiftHalfBF16AVX2(dst, src unsafe.Pointer, rows, hd, n int, c, s *float32)

//go:noescape
func shiftHalfF16AVX2(dst, src unsafe.Pointer, rows, hd, n int, c, s *float32)

//go:noescape
func shiftHalfF32AVX2(dst, src unsafe.Pointer, rows, hd, n int, c, s *float32)

//go:noescape
func shiftPairsBF16AVX2(dst, src unsafe.Pointer, rows, hd, n int, c, s *float32)

//go:noescape
func shiftPairsF16AVX2(dst, src unsafe.Pointer, rows, hd, n int, c, s *float32)

//go:noescape
func shiftPairsF32AVX2(dst, src unsafe.Pointer, rows, hd, n int, c, s *float32)

type shiftKernel func(dst, src unsafe.Pointer, rows, hd, n int, c, s *float32)

// shiftRowsFast runs the SIMD kernel for rows of r.HeadDim() elements of dt
// and reports whether it did; when it did not, nothing was written. rows >= 1.
func shiftRowsFast(dst, src unsafe.Pointer, dt format.DType, rows int, r *RoPE, c, s []float32) bool {
	if !shiftAVX2 {
		return false
	}
	half := r.cfg.Style == format.RoPERotateHalf
	bf16 := dt == format.DTypeBF16
	block := 8 // elements per kernel step: pairs (half) or dims (interleaved)
	if bf16 {
		block = 16
	}
	var k shiftKernel
	switch {
	case half && (r.rot/2)%block != 0, !half && r.rot%block != 0:
		return false
	case bf16 && half:
		k = shiftHalfBF16AVX2
	case bf16:
		k = shiftPairsBF16AVX2
	case dt == format.DTypeF16 && half:
		k = shiftHalfF16AVX2
	case dt == format.DTypeF16:
		k = shiftPairsF16AVX2
	case dt == format.DTypeF32 && half:
		k = shiftHalfF32AVX2
	case dt == format.DTypeF32:
		k = shiftPairsF32AVX2
	default:
		return false
	}
	n := r.rot / 2
	if !half {
		c, s = shiftExpand(c, s)
		n = r.rot
	}
	if bf16 {
		c, s = shiftPermute16(c), shiftPermute16(s)
	}
	k(dst, src, rows, r.headDim, n, &c[0], &s[0])
	if dst != src && r.rot < r.headDim {
		shiftCopyTails(dst, src, dt.Size(), rows, r.headDim, r.rot)
	}
	return true
}

// shiftExpand lays per-pair cos and sin out per element for interleaved
// pairs: (c0, c0, c1, c1, ...) and (-s0, s0, -s1, s1, ...).
func shiftExpand(c, s []float32) (ce, se []float32) {
	ce, se = make([]float32, 2*len(c)), make([]float32, 2*len(s))
	for j := range c {
		ce[2*j], ce[2*j+1] = c[j], c[j]
		se[2*j], se[2*j+1] = -s[j], s[j]
	}
	return ce, se
}

// shiftPermute16 returns x with the middle two quads of every 16 values
// swapped, the lane order of the bf16 kernels' unpacked vectors.
func shiftPermute16(x []float32) []float32 {
	p := make([]float32, len(x))
	for b := 0; b < len(x); b += 16 {
		copy(p[b:b+4], x[b:b+4])
		copy(p[b+4:b+8], x[b+8:b+12])
		copy(p[b+8:b+12], x[b+4:b+8])
		copy(p[b+12:b+16], x[b+12:b+16])
	}
	return p
}

// shiftCopyTails copies the pass-through dims of each row, out of place.
func shiftCopyTails(dst, src unsafe.Pointer, size, rows, hd, rot int) {
	d := unsafe.Slice((*byte)(dst), rows*hd*size)
	x := unsafe.Slice((*byte)(src), rows*hd*size)
	for row := range rows {
		copy(d[(row*hd+rot)*size:(row+1)*hd*size], x[(row*hd+rot)*size:(row+1)*hd*size])
	}
}
