package crc32c

import "unsafe"

// Copy copies src into dst like the built-in copy, n = min(len(dst),
// len(src)) bytes, and returns Update(crc, src[:n]), the CRC of the bytes
// as they were in src before the call. With the avx512 kernel (from 64
// bytes) and the sse one (64-255 bytes) it reads each byte once, storing
// and folding it in the same pass, so a verified copy costs about one
// copy instead of a copy and a second read; elsewhere it is Update, then
// copy. Overlapping dst and src are allowed; then the CRC is taken first
// and the bytes copied after, in two passes.
func Copy(dst, src []byte, crc uint32) uint32 {
	n := min(len(dst), len(src))
	if n == 0 {
		return crc
	}
	dst, src = dst[:n], src[:n]
	if overlap(dst, src) {
		crc = update(crc, src)
		copy(dst, src)
		return crc
	}
	return copyUpdate(dst, src, crc)
}

// overlap reports whether a and b, both non-empty, share a byte.
func overlap(a, b []byte) bool {
	pa := uintptr(unsafe.Pointer(unsafe.SliceData(a)))
	pb := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	return pa < pb+uintptr(len(b)) && pb < pa+uintptr(len(a))
}
