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

// shiftAVX512 says whether the AVX-512 rotate-half bf16 kernels can run; a
// variable so that the tests can run the AVX2 kernels on a CPU that has
// both (a Shifter keeps the choice made when it was built).
var shiftAVX512 = shiftAVX2 && cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW

// shiftAVX512BF16 says whether those kernels round with AVX512_BF16's
// VCVTNE2PS2BF16 (shiftHalfBF16CVT); a variable for the tests too.
var shiftAVX512BF16 = shiftAVX512 && cpu.X86.HasAVX512BF16

// The kernels rotate rows in place or out of place at byte strides ds
// (dst) and ss (src); n is the pair count per row (half) or the rotated
// dims (pairs). See shift_amd64.s.

//go:noescape
func shiftHalfBF16AVX2(dst, src unsafe.Pointer, rows, ds, ss, n int, c, s *float32)

//go:noescape
func shiftHalfF16AVX2(dst, src unsafe.Pointer, rows, ds, ss, n int, c, s *float32)

//go:noescape
func shiftHalfF32AVX2(dst, src unsafe.Pointer, rows, ds, ss, n int, c, s *float32)

//go:noescape
func shiftPairsBF16AVX2(dst, src unsafe.Pointer, rows, ds, ss, n int, c, s *float32)

//go:noescape
func shiftPairsF16AVX2(dst, src unsafe.Pointer, rows, ds, ss, n int, c, s *float32)

//go:noescape
func shiftPairsF32AVX2(dst, src unsafe.Pointer, rows, ds, ss, n int, c, s *float32)

//go:noescape
func shiftHalfBF16AVX512(dst, src unsafe.Pointer, rows, ds, ss, n int, c, s *float32)

//go:noescape
func shiftHalfBF16AVX512NT(dst, src unsafe.Pointer, rows, ds, ss, n int, c, s *float32)

//go:noescape
func shiftHalfBF16CVT(dst, src unsafe.Pointer, rows, ds, ss, n int, c, s *float32)

//go:noescape
func shiftHalfBF16CVTNT(dst, src unsafe.Pointer, rows, ds, ss, n int, c, s *float32)

// wideKernels is the pair of AVX-512 kernels, cached and non-temporal
// stores, that runs where shiftWide holds.
func wideKernels() (k, nt shiftKernel) {
	if shiftAVX512BF16 {
		return shiftHalfBF16CVT, shiftHalfBF16CVTNT
	}
	return shiftHalfBF16AVX512, shiftHalfBF16AVX512NT
}

type shiftKernel func(dst, src unsafe.Pointer, rows, ds, ss, n int, c, s *float32)

// shiftRowsFast runs the SIMD kernel for rows of r.HeadDim() elements of dt
// and reports whether it did; when it did not, nothing was written. rows >= 1.
func shiftRowsFast(dst, src unsafe.Pointer, dt format.DType, rows int, r *RoPE, c, s []float32) bool {
	wide := shiftWide(r, dt)
	k := shiftKernelFor(r, dt, wide)
	if k == nil {
		return false
	}
	c, s = shiftLaneTable(r, dt, c, s, wide)
	rb := r.headDim * dt.Size()
	shiftRun(k, dst, src, dt, rows, rb, rb, r, c, s)
	return true
}

// shiftLanes is a Shifter's table laid out for the kernels once: c and s
// for the f32 and f16 kernels, cb and sb for the bf16 ones (nil where no
// kernel fits), and wide and wideNT, the AVX-512 kernels cb and sb are
// laid out for (nil when they are laid out for the AVX2 ones).
type shiftLanes struct {
	c, s, cb, sb []float32
	wide, wideNT shiftKernel
}

func newShiftLanes(r *RoPE, c, s []float32) shiftLanes {
	var l shiftLanes
	if shiftKernelFor(r, format.DTypeF32, false) != nil {
		l.c, l.s = shiftLaneTable(r, format.DTypeF32, c, s, false)
	}
	wide := shiftWide(r, format.DTypeBF16)
	if wide {
		l.wide, l.wideNT = wideKernels()
	}
	if shiftKernelFor(r, format.DTypeBF16, wide) != nil {
		l.cb, l.sb = shiftLaneTable(r, format.DTypeBF16, c, s, wide)
	}
	return l
}

// rows is shiftRowsFast with the tables of l.
func (l *shiftLanes) rows(dst, src unsafe.Pointer, dt format.DType, rows int, r *RoPE) bool {
	rb := r.headDim * dt.Size()
	return l.strided(dst, src, dt, rows, rb, rb, r, false)
}

// strided is rows with row i at dst+i*ds and src+i*ss, stored with
// non-temporal hints when stream is set and the kernel that runs has them
// (the AVX-512 ones, on a dst and ds that are multiples of 64).
func (l *shiftLanes) strided(dst, src unsafe.Pointer, dt format.DType, rows, ds, ss int, r *RoPE, stream bool) bool {
	wide := dt == format.DTypeBF16 && l.wide != nil
	k := shiftKernelFor(r, dt, false)
	c, s := l.c, l.s
	if dt == format.DTypeBF16 {
		c, s = l.cb, l.sb
	}
	if wide {
		k = l.wide
		if stream && uintptr(dst)%64 == 0 && ds%64 == 0 {
			k = l.wideNT
		}
	}
	if k == nil || c == nil {
		return false
	}
	shiftRun(k, dst, src, dt, rows, ds, ss, r, c, s)
	return true
}

// shiftWide reports whether rows of r's heads of dt rotate with the
// AVX-512 kernel: bf16, rotate-half, a multiple of 32 pairs.
func shiftWide(r *RoPE, dt format.DType) bool {
	return shiftAVX512 && dt == format.DTypeBF16 && r.cfg.Style == format.RoPERotateHalf && (r.rot/2)%32 == 0
}

// shiftKernelFor is the SIMD kernel for rows of r's heads of dt, nil when
// none runs here or fits the rotated dims; wide (shiftWide) picks the
// AVX-512 one.
func shiftKernelFor(r *RoPE, dt format.DType, wide bool) shiftKernel {
	if !shiftAVX2 {
		return nil
	}
	if wide {
		k, _ := wideKernels()
		return k
	}
	half := r.cfg.Style == format.RoPERotateHalf
	bf16 := dt == format.DTypeBF16
	block := 8 // elements per kernel step: pairs (half) or dims (interleaved)
	if bf16 {
		block = 16
	}
	switch {
	case half && (r.rot/2)%block != 0, !half && r.rot%block != 0:
		return nil
	case bf16 && half:
		return shiftHalfBF16AVX2
	case bf16:
		return shiftPairsBF16AVX2
	case dt == format.DTypeF16 && half:
		return shiftHalfF16AVX2
	case dt == format.DTypeF16:
		return shiftPairsF16AVX2
	case dt == format.DTypeF32 && half:
		return shiftHalfF32AVX2
	case dt == format.DTypeF32:
		return shiftPairsF32AVX2
	}
	return nil
}

// shiftLaneTable lays per-pair c and s out as dt's kernel reads them (the
// AVX-512 one when wide).
func shiftLaneTable(r *RoPE, dt format.DType, c, s []float32, wide bool) (lc, ls []float32) {
	if r.cfg.Style != format.RoPERotateHalf {
		c, s = shiftExpand(c, s)
	}
	switch {
	case dt == format.DTypeBF16 && wide:
		c, s = shiftPermute32(c), shiftPermute32(s)
	case dt == format.DTypeBF16:
		c, s = shiftPermute16(c), shiftPermute16(s)
	}
	return c, s
}

// shiftRun runs kernel k with lane tables c and s over rows at byte
// strides ds and ss, and copies the pass-through dims out of place.
func shiftRun(k shiftKernel, dst, src unsafe.Pointer, dt format.DType, rows, ds, ss int, r *RoPE, c, s []float32) {
	n := r.rot / 2
	if r.cfg.Style != format.RoPERotateHalf {
		n = r.rot
	}
	k(dst, src, rows, ds, ss, n, &c[0], &s[0])
	if dst != src && r.rot < r.headDim {
		shiftCopyTails(dst, src, dt.Size(), rows, ds, ss, r.headDim, r.rot)
	}
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

// shiftPermute32 returns x with every 32 values laid out as the AVX-512
// bf16 kernel's unpacked vectors hold them: quads 0, 2, 4, 6, then 1, 3,
// 5, 7.
func shiftPermute32(x []float32) []float32 {
	p := make([]float32, len(x))
	for b := 0; b < len(x); b += 32 {
		for q := range 8 {
			copy(p[b+q*4:b+q*4+4], x[b+(q%4*2+q/4)*4:])
		}
	}
	return p
}

// shiftCopyTails copies the pass-through dims of each row, out of place,
// rows at byte strides ds and ss.
func shiftCopyTails(dst, src unsafe.Pointer, size, rows, ds, ss, hd, rot int) {
	rb := hd * size
	d := unsafe.Slice((*byte)(dst), (rows-1)*ds+rb)
	x := unsafe.Slice((*byte)(src), (rows-1)*ss+rb)
	for row := range rows {
		copy(d[row*ds+rot*size:row*ds+rb], x[row*ss+rot*size:row*ss+rb])
	}
}
