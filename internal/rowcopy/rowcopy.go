// Package rowcopy copies rows of bytes between strided layouts: row i of
// rows rows of rowBytes bytes is read at src[i*srcStride:] and written at
// dst[i*dstStride:]. It is the value half of placing KV rows into a paged
// cache ([block][slot][head][dim]) from a stored chunk ([head][token][dim]),
// where the rows are short (a few hundred bytes) and the built-in copy, one
// call per row, spends as much time in the call as in the bytes.
//
// Copy runs an AVX2 kernel on amd64 and gives the bytes of the portable
// loop, one copy per row (Loop), which is what runs on other CPUs, for rows
// that are not a multiple of 32 bytes, when dst and src overlap, and under
// the purego build tag. (A non-temporal-store variant was measured and
// filled large destinations no faster: docs/decisions.md.)
package rowcopy

import (
	"fmt"
	"unsafe"

	"github.com/kvstore/kvstore/format"
)

// ErrInvalidArgument is format's, so that errors.Is works with the
// callers' names for it.
var ErrInvalidArgument = format.ErrInvalidArgument

// Copy copies rows rows of rowBytes bytes from src at srcStride to dst at
// dstStride. Errors wrap ErrInvalidArgument: negative counts, a stride
// shorter than a row, or slices too short for the rows; nothing is
// written then.
func Copy(dst, src []byte, rows, rowBytes, dstStride, srcStride int) error {
	rb, ds, ss := rowBytes, dstStride, srcStride
	if rows < 0 || rb < 0 || ds < rb || ss < rb {
		return fmt.Errorf("%w: rowcopy: %d rows of %d bytes at strides dst %d src %d", ErrInvalidArgument, rows, rb, ds, ss)
	}
	if rows == 0 || rb == 0 {
		return nil
	}
	nd, ns := (rows-1)*ds+rb, (rows-1)*ss+rb
	if len(dst) < nd || len(src) < ns {
		return fmt.Errorf("%w: rowcopy: %d rows of %d bytes at strides dst %d src %d need %d and %d bytes, got %d and %d",
			ErrInvalidArgument, rows, rb, ds, ss, nd, ns, len(dst), len(src))
	}
	d, s := unsafe.Pointer(&dst[0]), unsafe.Pointer(&src[0])
	if overlap(d, s, nd, ns) || !kernel(d, s, rows, rb, ds, ss) {
		Loop(dst, src, rows, rb, ds, ss)
	}
	return nil
}

// Loop is the portable loop, one built-in copy per row; the slices must
// hold the rows.
func Loop(dst, src []byte, rows, rowBytes, dstStride, srcStride int) {
	for i := range rows {
		copy(dst[i*dstStride:i*dstStride+rowBytes], src[i*srcStride:i*srcStride+rowBytes])
	}
}

// overlap reports whether [d, d+nd) and [s, s+ns) share a byte.
func overlap(d, s unsafe.Pointer, nd, ns int) bool {
	a, b := uintptr(d), uintptr(s)
	return a < b+uintptr(ns) && b < a+uintptr(nd)
}
