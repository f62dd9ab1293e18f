//go:build amd64 && !purego

package crc32c

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// kernels are the folding kernels of this build, each tested against
// hash/crc32 where the CPU runs it.
var kernels = []testKernel{
	{"avx512", hasAVX512, avx512Min, updateAVX512, copyAVX512},
	{"avx512-noblocks", hasAVX512, avx512Min, withoutBlocks(updateAVX512), nil},
	{"sse", hasSSE, sseMin, updateSSE, copySSE},
}

// withoutBlocks runs update with avx512Blocks off, as on CPUs other than
// AMD Zen 5.
func withoutBlocks(update func(uint32, []byte) uint32) func(uint32, []byte) uint32 {
	return func(crc uint32, p []byte) uint32 {
		defer func(v bool) { avx512Blocks = v }(avx512Blocks)
		avx512Blocks = false
		return update(crc, p)
	}
}

// TestCPU logs what the kernels' detection found.
func TestCPU(t *testing.T) {
	t.Logf("avx512 %v (blocks %v, AMD family %#x), sse %v", hasAVX512, avx512Blocks, amdFamily(), hasSSE)
}

// TestDispatchSSE runs Update and Copy as on a CPU without AVX-512, so
// that the SSE kernel's dispatch (short, hash/crc32 between, hybrid) is
// checked here too.
func TestDispatchSSE(t *testing.T) {
	if !hasSSE {
		t.Skip("no SSE4.2 + PCLMULQDQ")
	}
	defer func(v bool) { hasAVX512 = v }(hasAVX512)
	hasAVX512 = false
	r := rand.New(rand.NewPCG(21, 22))
	buf := randBytes(r, 3*sseHybridMin)
	dst := make([]byte, len(buf))
	for n := 0; n < len(buf)-64; n += 1 + n/16 {
		off := r.IntN(64)
		p := buf[off : off+n]
		seed := r.Uint32()
		w := want(seed, p)
		if got := Update(seed, p); got != w {
			t.Fatalf("Update(%#x, len %d) = %#08x, want %#08x", seed, n, got, w)
		}
		if got := Copy(dst, p, seed); got != w || !bytes.Equal(dst[:n], p) {
			t.Fatalf("Copy(%#x, len %d) = %#08x, want %#08x", seed, n, got, w)
		}
	}
}
