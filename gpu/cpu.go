package gpu

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"unsafe"
)

// cpuDevice is the Device that runs everywhere: device memory is Go memory,
// each Stream is a goroutine draining an ordered queue, and the kernels are
// Go code that calls or mirrors the reconstruct package's CPU reference.
type cpuDevice struct {
	closed atomic.Bool
	// kernels, when set, runs the kernels instead of the Go code, and
	// allocations get fake device addresses: the tests use it to run the
	// CUDA C sources compiled for the host (emu_test.go).
	kernels  kernelRunner
	fakeNext atomic.Uint64
}

// kernelRunner runs enqueued kernels on the CPU device's stream goroutine.
type kernelRunner interface {
	reconstruct(l *ReconstructLaunch) error
	shift(l *ShiftLaunch) error
}

// CPU returns a new CPU device. It is always available and is what CI and
// GPU-less servers use; it keeps the stream, event and copy semantics of
// the CUDA device so that the same pipeline runs on both.
func CPU() Device { return &cpuDevice{} }

func (d *cpuDevice) Info() Info {
	return Info{Kind: KindCPU, Name: "cpu", Multiprocessors: runtime.GOMAXPROCS(0)}
}

func (d *cpuDevice) check(what string) error {
	if d.closed.Load() {
		return fmt.Errorf("%w: cpu device: %s", ErrClosed, what)
	}
	return nil
}

// alignedBytes returns n bytes whose first byte is aligned to align, a power
// of two.
func alignedBytes(n, align int) []byte {
	raw := make([]byte, n+align-1)
	skip := (align - int(uintptr(unsafe.Pointer(unsafe.SliceData(raw))))&(align-1)) & (align - 1)
	return raw[skip : skip+n : skip+n]
}

func (d *cpuDevice) Alloc(n int) (Buffer, error) {
	if err := d.check("alloc"); err != nil {
		return Buffer{}, err
	}
	if n <= 0 {
		return Buffer{}, fmt.Errorf("%w: cpu device: alloc of %d bytes", ErrInvalidArgument, n)
	}
	m := &memory{owner: d, host: alignedBytes(n, 256), size: n}
	if d.kernels != nil {
		m.ptr = d.fakeNext.Add(1) << 36
	}
	return Buffer{mem: m, n: n}, nil
}

func (d *cpuDevice) Free(b Buffer) error {
	if err := d.check("free"); err != nil {
		return err
	}
	if err := b.ownedBy(d, "free"); err != nil {
		return err
	}
	if !b.whole() {
		return fmt.Errorf("%w: cpu device: free of a sub-buffer", ErrInvalidArgument)
	}
	return nil // the garbage collector takes it
}

func (d *cpuDevice) AllocHost(n int) (HostBuffer, error) {
	if err := d.check("alloc host"); err != nil {
		return HostBuffer{}, err
	}
	if n <= 0 {
		return HostBuffer{}, fmt.Errorf("%w: cpu device: host alloc of %d bytes", ErrInvalidArgument, n)
	}
	return HostBuffer{b: alignedBytes(n, 4096), owner: d}, nil
}

func (d *cpuDevice) FreeHost(h HostBuffer) error {
	if err := d.check("free host"); err != nil {
		return err
	}
	if h.owner != d {
		return fmt.Errorf("%w: cpu device: free of a host buffer of another device", ErrInvalidArgument)
	}
	return nil
}

func (d *cpuDevice) NewStream() (Stream, error) {
	if err := d.check("new stream"); err != nil {
		return nil, err
	}
	return newCPUStream(d), nil
}

func (d *cpuDevice) NewEvent() (Event, error) {
	if err := d.check("new event"); err != nil {
		return nil, err
	}
	return newCPUEvent(d), nil
}

func (d *cpuDevice) Close() error {
	d.closed.Store(true)
	return nil
}
