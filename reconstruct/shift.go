package reconstruct

import (
	"encoding/binary"
	"fmt"
	"math"
	"unsafe"

	"github.com/kvstore/kvstore/format"
)

// Shift re-rotates keys stored post-RoPE as [heads][tokens][head_dim]
// elements of dtype dt (f32, f16 or bf16, little endian) by delta positions,
// the same for every token: a key rotated for position p comes out rotated
// for p+delta. It is a pure rotation (AttentionScale is already in the
// stored keys and is not applied again).
//
// dst and src must be the same slice (in place) or not overlap. The math is
// float32 with cos and sin of delta*InvFreq() computed once in float64;
// results are rounded back to dt to nearest even. delta == 0 copies exactly.
//
// Shift(delta) followed by Shift(-delta) returns each element x of a pair
// (x, y) to within e*|(x, y)|, |(x, y)| the pair's norm, where e is 1e-6 for
// f32, 1.25*2^-7 for bf16 and 1.25*2^-10 for f16 (two roundings of half an
// ulp each, one rotated across the pair), plus 2^-24 absolute for f16
// subnormals. A rotation can grow an element to its pair's norm, so f16 keys
// within sqrt(2) of the f16 maximum can overflow to infinity.
//
// Errors wrap format.ErrInvalidArgument: a nil RoPE, a non-float dtype,
// negative or overflowing counts, lengths that are not heads*tokens*head_dim
// elements, or partially overlapping slices.
func Shift(dst, src []byte, dt format.DType, r *RoPE, heads, tokens int, delta int64) error {
	return shiftBytes(dst, src, dt, r, heads, tokens, delta, nil)
}

// Shifter is Shift by one fixed delta with its rotation table (and the
// table's SIMD lane layouts) built once, for callers that shift many
// buffers by the same delta, as store's Assemble does for every layer of a
// packet. Its results are bit for bit those of Shift and ShiftF32 with the
// same RoPE and delta. It is immutable and safe for concurrent use.
type Shifter struct {
	r     *RoPE
	delta int64
	c, s  []float32 // AppendCosSin(delta, pure rotation), per pair
	lanes shiftLanes
}

// NewShifter builds the rotation table of a shift by delta positions under
// r. Errors wrap format.ErrInvalidArgument (a nil RoPE).
func NewShifter(r *RoPE, delta int64) (*Shifter, error) {
	if r == nil {
		return nil, fmt.Errorf("%w: reconstruct: new shifter: nil RoPE", format.ErrInvalidArgument)
	}
	sh := &Shifter{r: r, delta: delta}
	if delta != 0 {
		sh.c, sh.s = r.shiftTable(delta)
		sh.lanes = newShiftLanes(r, sh.c, sh.s)
	}
	return sh, nil
}

// Delta is the number of positions sh shifts by.
func (sh *Shifter) Delta() int64 { return sh.delta }

// Shift is Shift(dst, src, dt, r, heads, tokens, delta) with sh's RoPE and
// delta, without rebuilding the table; same contract and errors.
func (sh *Shifter) Shift(dst, src []byte, dt format.DType, heads, tokens int) error {
	return shiftBytes(dst, src, dt, sh.r, heads, tokens, sh.delta, sh)
}

// ShiftF32 is ShiftF32 with sh's RoPE and delta, without rebuilding the
// table; same contract and errors.
func (sh *Shifter) ShiftF32(dst, src []float32, heads, tokens int) error {
	return shiftF32(dst, src, sh.r, heads, tokens, sh.delta, sh)
}

// shiftBytes is Shift with the table of sh, or one built for this call
// when sh is nil.
func shiftBytes(dst, src []byte, dt format.DType, r *RoPE, heads, tokens int, delta int64, sh *Shifter) error {
	if !dt.Float() {
		return fmt.Errorf("%w: reconstruct: shift: dtype %v is not f32, f16 or bf16", format.ErrInvalidArgument, dt)
	}
	n, err := shiftCheck(r, heads, tokens)
	if err != nil {
		return err
	}
	if n > math.MaxInt/dt.Size() || len(src) != n*dt.Size() || len(dst) != n*dt.Size() {
		return fmt.Errorf("%w: reconstruct: shift: %d heads x %d tokens x %d dims of %v need %d bytes, got src %d, dst %d",
			format.ErrInvalidArgument, heads, tokens, r.headDim, dt, n*dt.Size(), len(src), len(dst))
	}
	if n == 0 {
		return nil
	}
	if err := shiftCheckOverlap(unsafe.Pointer(&dst[0]), unsafe.Pointer(&src[0]), len(dst)); err != nil {
		return err
	}
	if delta == 0 {
		copy(dst, src)
		return nil
	}
	rows := heads * tokens
	var c, s []float32
	if sh != nil {
		c, s = sh.c, sh.s
		if sh.lanes.rows(unsafe.Pointer(&dst[0]), unsafe.Pointer(&src[0]), dt, rows, r) {
			return nil
		}
	} else {
		c, s = r.shiftTable(delta)
		if shiftRowsFast(unsafe.Pointer(&dst[0]), unsafe.Pointer(&src[0]), dt, rows, r, c, s) {
			return nil
		}
	}
	switch dt {
	case format.DTypeF32:
		shiftRowsF32Bytes(dst, src, rows, r.headDim, r.rot, r.cfg.Style, c, s)
	case format.DTypeBF16:
		shiftRowsBF16(dst, src, rows, r.headDim, r.rot, r.cfg.Style, c, s)
	case format.DTypeF16:
		shiftRowsF16(dst, src, rows, r.headDim, r.rot, r.cfg.Style, c, s)
	}
	return nil
}

// ShiftF32 is Shift on float32 slices of heads*tokens*HeadDim() elements.
func ShiftF32(dst, src []float32, r *RoPE, heads, tokens int, delta int64) error {
	return shiftF32(dst, src, r, heads, tokens, delta, nil)
}

// shiftF32 is ShiftF32 with the table of sh, or one built for this call
// when sh is nil.
func shiftF32(dst, src []float32, r *RoPE, heads, tokens int, delta int64, sh *Shifter) error {
	n, err := shiftCheck(r, heads, tokens)
	if err != nil {
		return err
	}
	if len(src) != n || len(dst) != n {
		return fmt.Errorf("%w: reconstruct: shift: %d heads x %d tokens x %d dims need %d floats, got src %d, dst %d",
			format.ErrInvalidArgument, heads, tokens, r.headDim, n, len(src), len(dst))
	}
	if n == 0 {
		return nil
	}
	if err := shiftCheckOverlap(unsafe.Pointer(&dst[0]), unsafe.Pointer(&src[0]), 4*n); err != nil {
		return err
	}
	if delta == 0 {
		copy(dst, src)
		return nil
	}
	rows := heads * tokens
	d, x := unsafe.Pointer(&dst[0]), unsafe.Pointer(&src[0])
	if sh != nil {
		if !sh.lanes.rows(d, x, format.DTypeF32, rows, r) {
			shiftRowsF32(dst, src, rows, r.headDim, r.rot, r.cfg.Style, sh.c, sh.s)
		}
		return nil
	}
	c, s := r.shiftTable(delta)
	if !shiftRowsFast(d, x, format.DTypeF32, rows, r, c, s) {
		shiftRowsF32(dst, src, rows, r.headDim, r.rot, r.cfg.Style, c, s)
	}
	return nil
}

// shiftCheck validates the shape and returns the element count.
func shiftCheck(r *RoPE, heads, tokens int) (int, error) {
	if r == nil {
		return 0, fmt.Errorf("%w: reconstruct: shift: nil RoPE", format.ErrInvalidArgument)
	}
	if heads < 0 || tokens < 0 {
		return 0, fmt.Errorf("%w: reconstruct: shift: negative shape %d heads x %d tokens", format.ErrInvalidArgument, heads, tokens)
	}
	if heads != 0 && tokens > math.MaxInt/heads/r.headDim {
		return 0, fmt.Errorf("%w: reconstruct: shift: %d heads x %d tokens x %d dims overflows", format.ErrInvalidArgument, heads, tokens, r.headDim)
	}
	return heads * tokens * r.headDim, nil
}

// shiftCheckOverlap accepts identical or disjoint ranges of n bytes.
func shiftCheckOverlap(dst, src unsafe.Pointer, n int) error {
	d, s := uintptr(dst), uintptr(src)
	if d != s && d < s+uintptr(n) && s < d+uintptr(n) {
		return fmt.Errorf("%w: reconstruct: shift: dst and src overlap without being the same slice", format.ErrInvalidArgument)
	}
	return nil
}

// shiftTable is the pure rotation table of delta (AppendCosSin), split
// into its cosines and sines.
func (r *RoPE) shiftTable(delta int64) (c, s []float32) {
	h := r.rot / 2
	cs := r.AppendCosSin(make([]float32, 0, 2*h), delta, false)
	return cs[:h:h], cs[h:]
}

// shiftPairStep says where the pairs of a row are: pair j is elements
// (j*step, j*step+off).
func shiftPairStep(style format.RoPEStyle, rot int) (step, off int) {
	if style == format.RoPEInterleaved {
		return 2, 1
	}
	return 1, rot / 2
}

// shiftPair rotates (a, b) by the angle whose cos and sin are c and s. The
// explicit conversions round each product, forbidding fused multiply-adds,
// so that the SIMD kernels can match it bit for bit.
func shiftPair(a, b, c, s float32) (float32, float32) {
	return float32(a*c) - float32(b*s), float32(b*c) + float32(a*s)
}

// shiftRowsF32 rotates rows of hd floats: pairs per style within the first
// rot, the rest copied when dst is not src. c and s hold rot/2 values.
func shiftRowsF32(dst, src []float32, rows, hd, rot int, style format.RoPEStyle, c, s []float32) {
	step, off := shiftPairStep(style, rot)
	inPlace := &dst[0] == &src[0]
	for row := range rows {
		d, x := dst[row*hd:(row+1)*hd], src[row*hd:(row+1)*hd]
		for j := range c {
			i := j * step
			d[i], d[i+off] = shiftPair(x[i], x[i+off], c[j], s[j])
		}
		if !inPlace {
			copy(d[rot:], x[rot:])
		}
	}
}

// shiftRowsF32Bytes is shiftRowsF32 on little-endian bytes of any alignment.
func shiftRowsF32Bytes(dst, src []byte, rows, hd, rot int, style format.RoPEStyle, c, s []float32) {
	step, off := shiftPairStep(style, rot)
	le := binary.LittleEndian
	for row := range rows {
		d, x := dst[4*row*hd:4*(row+1)*hd], src[4*row*hd:4*(row+1)*hd]
		for j := range c {
			i, k := 4*j*step, 4*(j*step+off)
			a, b := shiftPair(math.Float32frombits(le.Uint32(x[i:])), math.Float32frombits(le.Uint32(x[k:])), c[j], s[j])
			le.PutUint32(d[i:], math.Float32bits(a))
			le.PutUint32(d[k:], math.Float32bits(b))
		}
		copy(d[4*rot:], x[4*rot:])
	}
}

// shiftRowsBF16 is shiftRowsF32 on little-endian bfloat16 bytes.
func shiftRowsBF16(dst, src []byte, rows, hd, rot int, style format.RoPEStyle, c, s []float32) {
	step, off := shiftPairStep(style, rot)
	le := binary.LittleEndian
	for row := range rows {
		d, x := dst[2*row*hd:2*(row+1)*hd], src[2*row*hd:2*(row+1)*hd]
		for j := range c {
			i, k := 2*j*step, 2*(j*step+off)
			a, b := shiftPair(format.BF16ToF32(le.Uint16(x[i:])), format.BF16ToF32(le.Uint16(x[k:])), c[j], s[j])
			le.PutUint16(d[i:], format.F32ToBF16(a))
			le.PutUint16(d[k:], format.F32ToBF16(b))
		}
		copy(d[2*rot:], x[2*rot:])
	}
}

// shiftRowsF16 is shiftRowsF32 on little-endian IEEE binary16 bytes.
func shiftRowsF16(dst, src []byte, rows, hd, rot int, style format.RoPEStyle, c, s []float32) {
	step, off := shiftPairStep(style, rot)
	le := binary.LittleEndian
	for row := range rows {
		d, x := dst[2*row*hd:2*(row+1)*hd], src[2*row*hd:2*(row+1)*hd]
		for j := range c {
			i, k := 2*j*step, 2*(j*step+off)
			a, b := shiftPair(format.F16ToF32(le.Uint16(x[i:])), format.F16ToF32(le.Uint16(x[k:])), c[j], s[j])
			le.PutUint16(d[i:], format.F32ToF16(a))
			le.PutUint16(d[k:], format.F32ToF16(b))
		}
		copy(d[2*rot:], x[2*rot:])
	}
}
