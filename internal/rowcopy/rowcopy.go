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
// the purego build tag. Stream is Copy with non-temporal stores, ordered by
// one Fence after the last of them (docs/decisions.md: a fence per call
// cost more than the stores saved).
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

// Stream is Copy storing with non-temporal hints where the AVX2 kernel
// runs and dst and dstStride are multiples of 32, for a destination far
// larger than the cache that nobody reads soon; elsewhere it is Copy. Same
// bytes and errors. Such stores are weakly ordered: call Fence after the
// last Stream and before dst is handed to another goroutine or device.
func Stream(dst, src []byte, rows, rowBytes, dstStride, srcStride int) error {
	rb, ds, ss := rowBytes, dstStride, srcStride
	if rows <= 0 || rb <= 0 || ds < rb || ss < rb || len(dst) < (rows-1)*ds+rb || len(src) < (rows-1)*ss+rb {
		return Copy(dst, src, rows, rb, ds, ss) // its checks and errors
	}
	d, s := unsafe.Pointer(&dst[0]), unsafe.Pointer(&src[0])
	if uintptr(d)%32 != 0 || ds%32 != 0 || overlap(d, s, (rows-1)*ds+rb, (rows-1)*ss+rb) || !streamKernel(d, s, rows, rb, ds, ss) {
		return Copy(dst, src, rows, rb, ds, ss)
	}
	return nil
}

// Prefetch hints rows rows of rowBytes bytes of b, at srcStride, into the
// cache ahead of a Copy or Stream that reads them (a paged fill reads a
// token's rows from as many places as there are heads, more streams than
// the hardware prefetcher follows well). It has no effect where there is no
// prefetch instruction, and none on rows b does not hold: a hint, never an
// error.
func Prefetch(b []byte, rows, rowBytes, stride int) {
	if rows <= 0 || rowBytes <= 0 || stride < rowBytes || len(b) < (rows-1)*stride+rowBytes {
		return
	}
	prefetch(unsafe.Pointer(&b[0]), rows, rowBytes, stride)
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
