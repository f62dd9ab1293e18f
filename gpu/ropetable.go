package gpu

import (
	"math"

	"github.com/kvstore/kvstore/reconstruct"
)

// CosSin appends to dst the rotation table the kernels read for each
// position: Rotary()/2 cosines then Rotary()/2 sines of pos*InvFreq(),
// computed in float64 and rounded to float32 once, as reconstruct.RoPE
// computes them. With apply, both are then multiplied in float32 by
// AttentionScale(), as RoPE.Apply does (what a model does to a key at a
// position); without, the table is a pure rotation, as RoPE.Rotate and
// Shift use. A kernel rotating with the table therefore produces the bits
// the reference produces.
func CosSin(dst []float32, r *reconstruct.RoPE, positions []int64, apply bool) []float32 {
	inv := r.InvFreq()
	h := len(inv)
	scale := float32(1)
	if apply {
		scale = r.AttentionScale()
	}
	for _, pos := range positions {
		start := len(dst)
		dst = append(dst, make([]float32, 2*h)...)
		c, s := dst[start:start+h], dst[start+h:start+2*h]
		p := float64(pos)
		for j, f := range inv {
			sn, cs := math.Sincos(p * f)
			c[j], s[j] = float32(cs), float32(sn)
		}
		if scale != 1 {
			for j := range c {
				c[j] *= scale
				s[j] *= scale
			}
		}
	}
	return dst
}

// ShiftTable is the table of a key shift by delta positions (a pure
// rotation, as reconstruct.Shift rotates), for ShiftLaunch.CosSin; nil for
// delta 0, which copies exactly.
func ShiftTable(r *reconstruct.RoPE, delta int64) []float32 {
	if delta == 0 {
		return nil
	}
	return CosSin(nil, r, []int64{delta}, false)
}
