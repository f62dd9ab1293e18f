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
	{"sse", hasSSE, sseMin, updateSSE, copySSE},
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
