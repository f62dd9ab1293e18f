package gpu

import "fmt"

// Buffer is a range of device memory: a whole allocation from
// Device.Alloc, or a sub-range of one (Sub). It is a small value; copies
// share the memory. The zero Buffer is empty and belongs to no device.
type Buffer struct {
	mem *memory
	off int
	n   int
}

// memory is one allocation (or wrapped foreign range) of a device.
type memory struct {
	owner   any    // the device
	ptr     uint64 // CUDA device address of byte 0
	host    []byte // backing bytes on the CPU device
	size    int
	foreign bool // wrapped memory of someone else: Free refuses it
}

// Len is the buffer's length in bytes.
func (b Buffer) Len() int { return b.n }

// Offset is where the buffer starts within its allocation.
func (b Buffer) Offset() int { return b.off }

// Ptr is the CUDA device address of the buffer's first byte, for handing to
// other CUDA code in the process; 0 on the CPU device.
func (b Buffer) Ptr() uint64 {
	if b.mem == nil || b.mem.ptr == 0 {
		return 0
	}
	return b.mem.ptr + uint64(b.off)
}

// Sub returns the n bytes of b starting at off.
func (b Buffer) Sub(off, n int) (Buffer, error) {
	if off < 0 || n < 0 || off > b.n || n > b.n-off {
		return Buffer{}, fmt.Errorf("%w: sub-buffer [%d, +%d) of a %d-byte buffer", ErrInvalidArgument, off, n, b.n)
	}
	return Buffer{mem: b.mem, off: b.off + off, n: n}, nil
}

// whole reports whether b is an entire allocation of ours, as Free
// requires.
func (b Buffer) whole() bool {
	return b.mem != nil && !b.mem.foreign && b.off == 0 && b.n == b.mem.size
}

// ownedBy checks that b belongs to dev.
func (b Buffer) ownedBy(dev any, what string) error {
	if b.mem == nil {
		if b.n == 0 {
			return nil
		}
		return fmt.Errorf("%w: %s: buffer of no device", ErrInvalidArgument, what)
	}
	if b.mem.owner != dev {
		return fmt.Errorf("%w: %s: buffer of another device", ErrInvalidArgument, what)
	}
	return nil
}

// bytes is the CPU device's view of b.
func (b Buffer) bytes() []byte {
	if b.mem == nil {
		return nil
	}
	return b.mem.host[b.off : b.off+b.n : b.off+b.n]
}

// HostBuffer is host memory from Device.AllocHost: page-locked on CUDA,
// ordinary Go memory on the CPU device.
type HostBuffer struct {
	b      []byte
	owner  any
	pinned bool
	ptr    uintptr // CUDA: the address cuMemHostAlloc returned
}

// Bytes is the buffer's memory. It stays valid until FreeHost.
func (h HostBuffer) Bytes() []byte { return h.b }

// Len is the buffer's length in bytes.
func (h HostBuffer) Len() int { return len(h.b) }

// Pinned reports whether the memory is page-locked for the device.
func (h HostBuffer) Pinned() bool { return h.pinned }

// WrapDevice returns a Buffer over n bytes at CUDA device address ptr,
// memory owned by other CUDA code in the process (the server's KV cache,
// allocated in the same context, which is the primary one unless
// CUDAOptions.PrivateContext), so that kernels can write into it. dev must
// be a CUDA device; Free refuses the buffer.
func WrapDevice(dev Device, ptr uint64, n int) (Buffer, error) {
	d, ok := dev.(*cudaDevice)
	if !ok {
		return Buffer{}, fmt.Errorf("%w: wrap device memory: %s is not a CUDA device", ErrInvalidArgument, dev.Info().Kind)
	}
	return d.Wrap(ptr, n)
}

// WrapHost returns a CPU device Buffer over b, memory the caller owns (the
// server's KV cache in host memory), so that kernels can write into it.
// dev must be a CPU device; Free refuses the buffer.
func WrapHost(dev Device, b []byte) (Buffer, error) {
	d, ok := dev.(*cpuDevice)
	if !ok {
		return Buffer{}, fmt.Errorf("%w: wrap host memory: %s is not the CPU device", ErrInvalidArgument, dev.Info().Kind)
	}
	if len(b) == 0 {
		return Buffer{}, fmt.Errorf("%w: wrap host memory: empty slice", ErrInvalidArgument)
	}
	return Buffer{mem: &memory{owner: d, host: b, size: len(b), foreign: true}, n: len(b)}, nil
}
