package reconstruct

import (
	"fmt"
	"unsafe"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/internal/rowcopy"
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
	return sh.shiftRows(dst, src, dt, rows, dstStride, srcStride, false)
}

// StreamRows is ShiftRows storing with non-temporal hints where the kernel
// that runs has them (the AVX-512 bf16 rotate-half one, and the AVX2 copy
// when delta is 0, on a dst and dstStride aligned for them), for a
// destination far larger than the cache that nobody reads soon. Same
// results, contract and errors. Such stores are weakly ordered: call Fence
// after the last StreamRows and before dst is handed to another goroutine
// or device.
func (sh *Shifter) StreamRows(dst, src []byte, dt format.DType, rows, dstStride, srcStride int) error {
	return sh.shiftRows(dst, src, dt, rows, dstStride, srcStride, true)
}

// Fence orders every non-temporal store StreamRows made on this goroutine
// before the stores and loads that follow it (SFENCE on amd64; nothing
// elsewhere, where StreamRows stores as ShiftRows does).
func Fence() { rowcopy.Fence() }

func (sh *Shifter) shiftRows(dst, src []byte, dt format.DType, rows, dstStride, srcStride int, stream bool) error {
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
	if d, x := uintptr(unsafe.Pointer(&dst[0])), uintptr(unsafe.Pointer(&src[0])); d < x+uintptr((rows-1)*srcStride+rb) && x < d+uintptr((rows-1)*dstStride+rb) {
		for i := range rows { // the spans meet: each row must be its source or miss it
			if err := shiftCheckOverlap(unsafe.Pointer(&dst[i*dstStride]), unsafe.Pointer(&src[i*srcStride]), rb); err != nil {
				return err
			}
		}
	}
	if sh.delta == 0 && stream {
		return rowcopy.Stream(dst, src, rows, rb, dstStride, srcStride)
	}
	if sh.delta == 0 {
		return rowcopy.Copy(dst, src, rows, rb, dstStride, srcStride)
	}
	if sh.lanes.strided(unsafe.Pointer(&dst[0]), unsafe.Pointer(&src[0]), dt, rows, dstStride, srcStride, sh.r, stream) {
		return nil
	}
	for i := range rows {
		sh.row(dst[i*dstStride:i*dstStride+rb], src[i*srcStride:i*srcStride+rb], dt)
	}
	return nil
}

// row rotates one checked row x into d with sh's table and the portable
// code; sh.delta != 0.
func (sh *Shifter) row(d, x []byte, dt format.DType) {
	r := sh.r
	switch dt {
	case format.DTypeF32:
		shiftRowsF32Bytes(d, x, 1, r.headDim, r.rot, r.cfg.Style, sh.c, sh.s)
	case format.DTypeBF16:
		shiftRowsBF16(d, x, 1, r.headDim, r.rot, r.cfg.Style, sh.c, sh.s)
	case format.DTypeF16:
		shiftRowsF16(d, x, 1, r.headDim, r.rot, r.cfg.Style, sh.c, sh.s)
	}
}
