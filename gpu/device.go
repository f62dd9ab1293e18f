package gpu

import (
	"fmt"
	"time"
)

// Kind says which implementation a Device is.
type Kind uint8

const (
	KindCPU  Kind = 1 // goroutine streams over Go memory; always available
	KindCUDA Kind = 2 // the CUDA driver API through libcuda.so.1
)

func (k Kind) String() string {
	switch k {
	case KindCPU:
		return "cpu"
	case KindCUDA:
		return "cuda"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Info describes a device.
type Info struct {
	Kind Kind
	Name string
	// ComputeCapability is major*10+minor (80 for A100, 90 for H100), 0 on
	// the CPU device.
	ComputeCapability int
	// MemoryBytes is the device's total memory; 0 on the CPU device.
	MemoryBytes int64
	// Multiprocessors is the number of SMs (CUDA) or GOMAXPROCS (CPU).
	Multiprocessors int
	// DriverVersion is the CUDA driver version as cuDriverGetVersion
	// reports it (12040 for 12.4), 0 on the CPU device.
	DriverVersion int
}

// Device is a place where KV tensors are staged and rebuilt. Both
// implementations keep CUDA's stream semantics: work enqueued on one Stream
// runs in order, work on different Streams may overlap, and Events order
// work across Streams and with the host.
//
// Device memory (Buffer) is not zeroed by Alloc. Host memory from
// AllocHost is page-locked on CUDA (the fast path for copies) and ordinary
// Go memory on the CPU device. A Device is safe for concurrent use.
type Device interface {
	// Info describes the device.
	Info() Info
	// Alloc allocates n > 0 bytes of device memory, aligned to 256 bytes.
	Alloc(n int) (Buffer, error)
	// Free releases a Buffer returned by Alloc on this device. Work that
	// still uses it must have completed.
	Free(b Buffer) error
	// AllocHost allocates n > 0 bytes of host memory that copies can use
	// asynchronously (pinned on CUDA), aligned to 4096 bytes.
	AllocHost(n int) (HostBuffer, error)
	// FreeHost releases a HostBuffer returned by AllocHost on this device.
	FreeHost(h HostBuffer) error
	// NewStream creates an ordered queue of device work.
	NewStream() (Stream, error)
	// NewEvent creates an event, initially complete.
	NewEvent() (Event, error)
	// Close releases the device. Buffers, streams and events of the device
	// must not be used afterwards (on CUDA their calls return ErrClosed).
	// It is safe to call more than once, also concurrently: calls after
	// the first return nil.
	Close() error
}

// Stream is an ordered queue of device work. Enqueueing returns at once
// (argument errors are returned then); errors of the work itself are
// reported by the next Synchronize. Host memory handed to a copy must stay
// alive and untouched until the stream has passed the copy (Synchronize, or
// an Event recorded after it). Copies from and to AllocHost memory are
// asynchronous on CUDA; the CUDA device completes copies of ordinary Go
// memory before the call returns (the driver stages them through its own
// pinned buffers anyway), so that the garbage collector never races the
// DMA engine. A Stream is safe for concurrent use; work enqueued
// concurrently is ordered by the enqueue calls' order.
type Stream interface {
	// CopyHtoD copies len(src) == dst.Len() bytes from host to device.
	CopyHtoD(dst Buffer, src []byte) error
	// CopyDtoH copies src.Len() == len(dst) bytes from device to host.
	CopyDtoH(dst []byte, src Buffer) error
	// CopyDtoD copies src.Len() == dst.Len() bytes within the device.
	CopyDtoD(dst, src Buffer) error
	// Memset sets every byte of dst to v.
	Memset(dst Buffer, v byte) error
	// Record marks e complete once the work enqueued so far is done.
	Record(e Event) error
	// Wait makes later work on this stream wait for e's most recent
	// Record as of this call (a never-recorded event does not block).
	Wait(e Event) error
	// Reconstruct enqueues the fused low-rank reconstruction + RoPE kernel.
	Reconstruct(k *ReconstructLaunch) error
	// Shift enqueues the RoPE shift + scatter kernel.
	Shift(k *ShiftLaunch) error
	// Synchronize waits for all enqueued work and returns the first error
	// of that work, if any.
	Synchronize() error
	// Close waits for enqueued work and releases the stream.
	Close() error
}

// Event marks a point in a stream's work.
type Event interface {
	// Synchronize blocks until the work before the most recent Record is
	// done.
	Synchronize() error
	// Elapsed is the device time from start's most recent Record to this
	// event's; both must have completed.
	Elapsed(start Event) (time.Duration, error)
	// Close releases the event.
	Close() error
}

// Open returns the first CUDA device, or an error wrapping ErrNoDevice that
// says why there is none (no libcuda.so.1, no device, too old a device).
// It never exits or panics when the driver is absent; callers fall back to
// CPU():
//
//	dev, err := gpu.Open()
//	if err != nil {
//		log.Printf("GPU tier off: %v", err)
//		dev = gpu.CPU()
//	}
func Open() (Device, error) { return OpenCUDA(CUDAOptions{}) }
