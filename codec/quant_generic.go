//go:build !amd64 || purego

package codec

import "github.com/kvstore/kvstore/format"

// quantAVX2 is false: no SIMD kernels on this platform or under purego.
const quantAVX2 = false

// dequantFast has no SIMD kernel here; the portable code runs.
func dequantFast(out, data []byte, e, n, m, bits int, sc, of []float32, dt format.DType, groups bool) bool {
	return false
}

// paramsFast has no SIMD kernel here; the portable code runs.
func paramsFast(l *quantLayout, src []byte, i, n int, sc, of []float32, dt format.DType) bool {
	return false
}
