//go:build amd64 && !purego

package crc32c

// kernels are the folding kernels of this build, each tested against
// hash/crc32 where the CPU runs it.
var kernels = []testKernel{
	{"avx512", hasAVX512, avx512Min, updateAVX512, copyAVX512},
	{"sse", hasSSE, sseMin, updateSSE, copySSE},
}
