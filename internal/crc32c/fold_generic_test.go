//go:build !amd64 || purego

package crc32c

// kernels are the folding kernels of this build: none.
var kernels []testKernel
