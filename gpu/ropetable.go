package gpu

import "github.com/kvstore/kvstore/reconstruct"

// CosSin appends to dst the rotation table the kernels read for each
// position: reconstruct.RoPE.AppendCosSin of each position in turn, that is
// Rotary()/2 cosines then Rotary()/2 sines of pos*InvFreq(), computed in
// float64 and rounded to float32 once, the one definition reconstruct
// rotates with. With apply, both are then multiplied in float32 by
// AttentionScale(), as RoPE.Apply does (what a model does to a key at a
// position); without, the table is a pure rotation, as RoPE.Rotate and
// Shift use. A kernel rotating with the table therefore produces the bits
// the reference produces.
func CosSin(dst []float32, r *reconstruct.RoPE, positions []int64, apply bool) []float32 {
	for _, pos := range positions {
		dst = r.AppendCosSin(dst, pos, apply)
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
