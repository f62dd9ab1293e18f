package reconstruct

import (
	"fmt"
	"unsafe"

	"github.com/kvstore/kvstore/format"
)

// ShiftRows is Shift of rows single-head rows of dtype dt at byte strides:
// row i is read from src[i*srcStride:] and written to dst[i*dstStride:],
// each HeadDim() elements. It lets a caller rotate keys straight into a
// layout that interleaves heads (a paged cache block, [slot][head][dim])
// from one that does not, without a pass through scratch. Results are bit
// for bit those of sh.Shift on the same rows. Each row of dst must be the
// same as its row of src or not overlap it.
//
// Errors wrap format.ErrInvalidArgument: a non-float dtype, a negative row
// count, a stride shorter than a row, slices too short for the rows, or a
// row partially overlapping its source.
func (sh *Shifter) ShiftRows(dst, src []byte, dt format.DType, rows, dstStride, srcStride int) error {
	if !dt.Float() {
		return fmt.Errorf("%w: reconstruct: shift rows: dtype %v is not f32, f16 or bf16", format.ErrInvalidArgument, dt)
	}
	rb := sh.r.headDim * dt.Size()
	if rows < 0 || dstStride < rb || srcStride < rb {
		return fmt.Errorf("%w: reconstruct: shift rows: %d rows, strides dst %d src %d, rows of %d bytes", format.ErrInvalidArgument, rows, dstStride, srcStride, rb)
	}
	if rows == 0 {
		return nil
	}
	if need := func(stride int) int { return (rows-1)*stride + rb }; len(dst) < need(dstStride) || len(src) < need(srcStride) {
		return fmt.Errorf("%w: reconstruct: shift rows: %d rows at strides dst %d src %d need %d and %d bytes, got %d and %d",
			format.ErrInvalidArgument, rows, dstStride, srcStride, need(dstStride), need(srcStride), len(dst), len(src))
	}
	for i := range rows {
		d, x := dst[i*dstStride:i*dstStride+rb], src[i*srcStride:i*srcStride+rb]
		if err := shiftCheckOverlap(unsafe.Pointer(&d[0]), unsafe.Pointer(&x[0]), rb); err != nil {
			return err
		}
		sh.row(d, x, dt)
	}
	return nil
}

// row rotates one checked row x into d with sh's table.
func (sh *Shifter) row(d, x []byte, dt format.DType) {
	if sh.delta == 0 {
		copy(d, x)
		return
	}
	r := sh.r
	if sh.lanes.rows(unsafe.Pointer(&d[0]), unsafe.Pointer(&x[0]), dt, 1, r) {
		return
	}
	switch dt {
	case format.DTypeF32:
		shiftRowsF32Bytes(d, x, 1, r.headDim, r.rot, r.cfg.Style, sh.c, sh.s)
	case format.DTypeBF16:
		shiftRowsBF16(d, x, 1, r.headDim, r.rot, r.cfg.Style, sh.c, sh.s)
	case format.DTypeF16:
		shiftRowsF16(d, x, 1, r.headDim, r.rot, r.cfg.Style, sh.c, sh.s)
	}
}
