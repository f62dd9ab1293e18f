//go:build amd64 && !purego

package crc32c

import (
	"hash/crc32"

	"golang.org/x/sys/cpu"
)

// The kernels of fold_amd64.s. Each takes and returns a CRC as Update does
// and handles any length from its minimum up; the tail is summed with the
// CRC32 instruction.
var (
	// hasAVX512 says whether updateAVX512 and copyAVX512 run: 4 ZMM
	// accumulators folded with VPCLMULQDQ.
	hasAVX512 = cpu.X86.HasAVX512F && cpu.X86.HasAVX512VL &&
		cpu.X86.HasAVX512VPCLMULQDQ && cpu.X86.HasAVX2 &&
		cpu.X86.HasPCLMULQDQ && cpu.X86.HasSSE42
	// hasSSE says whether updateSSE and copySSE run: 4 XMM accumulators
	// folded with PCLMULQDQ.
	hasSSE = cpu.X86.HasPCLMULQDQ && cpu.X86.HasSSE41 && cpu.X86.HasSSE42

	// avx512Blocks says whether updateAVX512 runs its hybrid blocks
	// (fold_amd64.s reads it). They were measured only on AMD Zen 5
	// (family 0x1a), where six CRC32 chains run about as fast as the
	// folding; on a CPU that issues CRC32 once a cycle (Intel's cores do)
	// the blocks' 30 CRC32 instructions a step would bound the loop below
	// the folding alone, so other CPUs fold only.
	avx512Blocks = hasAVX512 && amdFamily() >= 0x1a
)

// cpuid executes CPUID with EAX = leaf, ECX = sub.
func cpuid(leaf, sub uint32) (eax, ebx, ecx, edx uint32)

// amdFamily returns the CPU family of an AMD CPU (0x1a: Zen 5), 0 for
// other vendors.
func amdFamily() uint32 {
	_, b, c, d := cpuid(0, 0)
	if b != 0x68747541 || d != 0x69746e65 || c != 0x444d4163 { // "AuthenticAMD"
		return 0
	}
	a, _, _, _ := cpuid(1, 0)
	family := a >> 8 & 0xf
	if family == 0xf {
		family += a >> 20 & 0xff
	}
	return family
}

// Minimum lengths the kernels accept (below them hash/crc32 runs), and
// where the SSE kernel pays: on the development machine it beats
// hash/crc32 under 256 bytes and, once its hybrid blocks run, from 10 KiB
// on; in between its four PCLMULQDQ chains alone run at about half the
// speed of hash/crc32's three CRC32 chains.
const (
	avx512Min    = 64
	sseMin       = 64
	sseShortMax  = 256
	sseHybridMin = sseMin + sseBlockBytes
)

//go:noescape
func updateAVX512(crc uint32, p []byte) uint32

//go:noescape
func copyAVX512(crc uint32, dst, src []byte) uint32

//go:noescape
func updateSSE(crc uint32, p []byte) uint32

//go:noescape
func copySSE(crc uint32, dst, src []byte) uint32

// kernel names the folding kernel Update uses on this CPU.
var kernel = func() string {
	switch {
	case hasAVX512:
		return "avx512"
	case hasSSE:
		return "sse"
	}
	return "none"
}()

func update(crc uint32, p []byte) uint32 {
	switch {
	case hasAVX512 && len(p) >= avx512Min:
		return updateAVX512(crc, p)
	case hasSSE && sseUseful(len(p)):
		return updateSSE(crc, p)
	}
	return crc32.Update(crc, table, p)
}

// copyUpdate is Copy for len(dst) == len(src) and no overlap.
func copyUpdate(dst, src []byte, crc uint32) uint32 {
	switch {
	case hasAVX512 && len(src) >= avx512Min:
		return copyAVX512(crc, dst, src)
	case hasSSE && len(src) >= sseMin && len(src) < sseShortMax:
		return copySSE(crc, dst, src)
	}
	crc = update(crc, src)
	copy(dst, src)
	return crc
}

// sseUseful reports whether updateSSE beats hash/crc32 on n bytes.
func sseUseful(n int) bool {
	return n >= sseMin && n < sseShortMax || n >= sseHybridMin
}
