package gpu

import "errors"

// Sentinel errors. Every error this package returns wraps one of them (or a
// format sentinel, or a context error), so callers test with errors.Is and
// read the wrapped text for what and where.
var (
	// ErrNoDevice reports that no usable CUDA device was found: libcuda.so.1
	// is absent, a driver symbol is missing, cuInit fails, no device exists,
	// or the device is older than compute capability 8.0. Callers fall back
	// to CPU().
	ErrNoDevice = errors.New("kvstore/gpu: no CUDA device")
	// ErrCUDA reports a failed CUDA driver call. The error is a *CUDAError
	// carrying the call, its CUresult code and the code's name and string.
	ErrCUDA = errors.New("kvstore/gpu: CUDA error")
	// ErrInvalidArgument reports a bad argument: a buffer of another device,
	// a range out of bounds, a shape that does not fit its buffers.
	ErrInvalidArgument = errors.New("kvstore/gpu: invalid argument")
	// ErrBudget reports that memory could not be found within a byte limit
	// (the device arena, the pinned pool, the prefetch budget).
	ErrBudget = errors.New("kvstore/gpu: over budget")
	// ErrClosed reports use of a closed device, stream, pool or prefetcher.
	ErrClosed = errors.New("kvstore/gpu: closed")
	// ErrCorruption reports bytes from a Source that do not parse as a
	// factor block.
	ErrCorruption = errors.New("kvstore/gpu: corrupt span bytes")
)
