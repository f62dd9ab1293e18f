//go:build amd64 && !purego

package crc32c

import (
	"bytes"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
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

// TestCPU checks the kernels' detection against the CPU as Linux describes
// it in /proc/cpuinfo (a source apart from golang.org/x/sys/cpu and from
// amdFamily's CPUID): each kernel runs exactly when the CPU has its
// features, and the hybrid blocks exactly on AMD family 0x1a and later.
// Then it checks the kernel Update chose against hash/crc32 on random
// inputs of lengths on both sides of every threshold of the dispatch.
func TestCPU(t *testing.T) {
	t.Logf("kernel %s: avx512 %v (blocks %v, AMD family %#x), sse %v", kernel, hasAVX512, avx512Blocks, amdFamily(), hasSSE)
	if info, err := os.ReadFile("/proc/cpuinfo"); err != nil {
		t.Logf("no /proc/cpuinfo (%v): detection not checked", err)
	} else {
		flags, vendor, family := cpuInfo(t, string(info))
		has := func(names ...string) bool {
			for _, n := range names {
				if !flags[n] {
					return false
				}
			}
			return true
		}
		wantSSE := has("pclmulqdq", "sse4_1", "sse4_2")
		wantAVX512 := has("avx512f", "avx512vl", "vpclmulqdq", "avx2", "pclmulqdq", "sse4_2")
		wantFamily := uint32(0)
		if vendor == "AuthenticAMD" {
			wantFamily = family
		}
		wantKernel := "none"
		switch {
		case wantAVX512:
			wantKernel = "avx512"
		case wantSSE:
			wantKernel = "sse"
		}
		if hasSSE != wantSSE || hasAVX512 != wantAVX512 || kernel != wantKernel {
			t.Errorf("detected sse %v, avx512 %v, kernel %s; /proc/cpuinfo says sse %v, avx512 %v, kernel %s",
				hasSSE, hasAVX512, kernel, wantSSE, wantAVX512, wantKernel)
		}
		if got := amdFamily(); got != wantFamily {
			t.Errorf("amdFamily() = %#x; /proc/cpuinfo says vendor %s, family %#x", got, vendor, family)
		}
		if want := wantAVX512 && wantFamily >= 0x1a; avx512Blocks != want {
			t.Errorf("avx512Blocks = %v, want %v", avx512Blocks, want)
		}
	}
	r := rand.New(rand.NewPCG(23, 24))
	buf := randBytes(r, 4*sseHybridMin)
	dst := make([]byte, len(buf))
	for _, edge := range []int{0, avx512Min, sseMin, sseShortMax, sseHybridMin, 3 * sseHybridMin} {
		for range 64 {
			n := max(0, edge+r.IntN(129)-64)
			off := r.IntN(64)
			p := buf[off : off+n]
			seed := r.Uint32()
			w := want(seed, p)
			if got := Update(seed, p); got != w {
				t.Fatalf("kernel %s: Update(%#x, len %d) = %#08x, hash/crc32 %#08x", kernel, seed, n, got, w)
			}
			if got := Copy(dst[:n], p, seed); got != w || !bytes.Equal(dst[:n], p) {
				t.Fatalf("kernel %s: Copy(%#x, len %d) = %#08x, hash/crc32 %#08x", kernel, seed, n, got, w)
			}
		}
	}
}

// cpuInfo returns the flags, vendor and family of the first processor in
// the text of /proc/cpuinfo.
func cpuInfo(t *testing.T, info string) (flags map[string]bool, vendor string, family uint32) {
	t.Helper()
	flags = make(map[string]bool)
	seen := 0
	for line := range strings.Lines(info) {
		key, value, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		key, value = strings.TrimSpace(key), strings.TrimSpace(value)
		switch key {
		case "flags":
			if seen&1 == 0 {
				for _, f := range strings.Fields(value) {
					flags[f] = true
				}
			}
			seen |= 1
		case "vendor_id":
			if seen&2 == 0 {
				vendor = value
			}
			seen |= 2
		case "cpu family":
			if seen&4 == 0 {
				f, err := strconv.ParseUint(value, 10, 32)
				if err != nil {
					t.Fatalf("/proc/cpuinfo: cpu family %q: %v", value, err)
				}
				family = uint32(f)
			}
			seen |= 4
		}
	}
	if seen != 7 {
		t.Fatalf("/proc/cpuinfo lacks flags, vendor_id or cpu family:\n%s", info)
	}
	return flags, vendor, family
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
