// Package cuda binds the CUDA driver API (libcuda.so.1) at run time with
// purego: no cgo, no build tag, no CUDA toolkit at build time. Load finds
// the library and every symbol the gpu package uses, by its versioned name
// (cuCtxCreate_v2, cuMemAlloc_v2, ...), or returns an error; it never
// panics or exits when the library or a symbol is absent.
//
// The functions are the raw C calls. CUDA handles (contexts, streams,
// events, modules, functions) are uintptr; device addresses are uint64
// (CUdeviceptr). Callers make a context current on the calling OS thread
// (CtxSetCurrent under runtime.LockOSThread) before calls that need one.
package cuda

import (
	"errors"
	"fmt"
	"unsafe"
)

// Result is a CUresult; 0 is CUDA_SUCCESS.
type Result int32

// Success is CUDA_SUCCESS.
const Success Result = 0

// Device attributes (CUdevice_attribute) the gpu package reads.
const (
	AttrMultiprocessorCount    = 16
	AttrComputeCapabilityMajor = 75
	AttrComputeCapabilityMinor = 76
)

// Flags.
const (
	MemHostAllocPortable = 0x01 // CU_MEMHOSTALLOC_PORTABLE
	StreamNonBlocking    = 0x01 // CU_STREAM_NON_BLOCKING
	EventBlockingSync    = 0x01 // CU_EVENT_BLOCKING_SYNC: waiting threads sleep, not spin
	EventDisableTiming   = 0x02 // CU_EVENT_DISABLE_TIMING

	JITInfoLogBuffer           = 3 // CU_JIT_INFO_LOG_BUFFER
	JITInfoLogBufferSizeBytes  = 4
	JITErrorLogBuffer          = 5 // CU_JIT_ERROR_LOG_BUFFER
	JITErrorLogBufferSizeBytes = 6
)

// Driver holds the bound entry points of one loaded libcuda.
type Driver struct {
	Path string // the library that was loaded

	Init                    func(flags uint32) Result
	DriverGetVersion        func(v *int32) Result
	DeviceGetCount          func(n *int32) Result
	DeviceGet               func(dev *int32, ordinal int32) Result
	DeviceGetName           func(name *byte, n int32, dev int32) Result
	DeviceGetAttribute      func(v *int32, attr int32, dev int32) Result
	DeviceTotalMem          func(bytes *uint64, dev int32) Result
	DevicePrimaryCtxRetain  func(ctx *uintptr, dev int32) Result
	DevicePrimaryCtxRelease func(dev int32) Result
	CtxCreate               func(ctx *uintptr, flags uint32, dev int32) Result // optional
	CtxDestroy              func(ctx uintptr) Result                           // optional
	CtxSetCurrent           func(ctx uintptr) Result
	CtxSynchronize          func() Result

	MemAlloc         func(dptr *uint64, n uint64) Result
	MemFree          func(dptr uint64) Result
	MemHostAlloc     func(p *unsafe.Pointer, n uint64, flags uint32) Result
	MemFreeHost      func(p unsafe.Pointer) Result
	MemcpyHtoDAsync  func(dst uint64, src unsafe.Pointer, n uint64, stream uintptr) Result
	MemcpyDtoHAsync  func(dst unsafe.Pointer, src uint64, n uint64, stream uintptr) Result
	MemcpyDtoDAsync  func(dst, src uint64, n uint64, stream uintptr) Result
	MemsetD8Async    func(dst uint64, v uint8, n uint64, stream uintptr) Result
	StreamCreate     func(s *uintptr, flags uint32) Result
	StreamDestroy    func(s uintptr) Result
	StreamSync       func(s uintptr) Result
	StreamWaitEvent  func(s, e uintptr, flags uint32) Result
	EventCreate      func(e *uintptr, flags uint32) Result
	EventDestroy     func(e uintptr) Result
	EventRecord      func(e, s uintptr) Result
	EventSynchronize func(e uintptr) Result
	EventElapsedTime func(ms *float32, start, end uintptr) Result

	ModuleLoadDataEx  func(m *uintptr, image unsafe.Pointer, nopts uint32, opts *int32, vals *uintptr) Result
	ModuleUnload      func(m uintptr) Result
	ModuleGetFunction func(f *uintptr, m uintptr, name string) Result
	LaunchKernel      func(f uintptr, gx, gy, gz, bx, by, bz, shmem uint32, stream uintptr, params *unsafe.Pointer, extra *unsafe.Pointer) Result

	GetErrorName   func(r Result, s **byte) Result
	GetErrorString func(r Result, s **byte) Result
}

// ErrLoad reports that the driver library or one of its symbols could not be
// loaded.
var ErrLoad = errors.New("cuda: driver library not loadable")

// symbol names one entry point: its C name, where it goes, whether it may
// be absent.
type symbol struct {
	name     string
	fn       any
	optional bool
}

func (d *Driver) symbols() []symbol {
	return []symbol{
		{"cuInit", &d.Init, false},
		{"cuDriverGetVersion", &d.DriverGetVersion, false},
		{"cuDeviceGetCount", &d.DeviceGetCount, false},
		{"cuDeviceGet", &d.DeviceGet, false},
		{"cuDeviceGetName", &d.DeviceGetName, false},
		{"cuDeviceGetAttribute", &d.DeviceGetAttribute, false},
		{"cuDeviceTotalMem_v2", &d.DeviceTotalMem, false},
		{"cuDevicePrimaryCtxRetain", &d.DevicePrimaryCtxRetain, false},
		{"cuDevicePrimaryCtxRelease_v2", &d.DevicePrimaryCtxRelease, false},
		{"cuCtxCreate_v2", &d.CtxCreate, true},
		{"cuCtxDestroy_v2", &d.CtxDestroy, true},
		{"cuCtxSetCurrent", &d.CtxSetCurrent, false},
		{"cuCtxSynchronize", &d.CtxSynchronize, false},
		{"cuMemAlloc_v2", &d.MemAlloc, false},
		{"cuMemFree_v2", &d.MemFree, false},
		{"cuMemHostAlloc", &d.MemHostAlloc, false},
		{"cuMemFreeHost", &d.MemFreeHost, false},
		{"cuMemcpyHtoDAsync_v2", &d.MemcpyHtoDAsync, false},
		{"cuMemcpyDtoHAsync_v2", &d.MemcpyDtoHAsync, false},
		{"cuMemcpyDtoDAsync_v2", &d.MemcpyDtoDAsync, false},
		{"cuMemsetD8Async", &d.MemsetD8Async, false},
		{"cuStreamCreate", &d.StreamCreate, false},
		{"cuStreamDestroy_v2", &d.StreamDestroy, false},
		{"cuStreamSynchronize", &d.StreamSync, false},
		{"cuStreamWaitEvent", &d.StreamWaitEvent, false},
		{"cuEventCreate", &d.EventCreate, false},
		{"cuEventDestroy_v2", &d.EventDestroy, false},
		{"cuEventRecord", &d.EventRecord, false},
		{"cuEventSynchronize", &d.EventSynchronize, false},
		{"cuEventElapsedTime", &d.EventElapsedTime, false},
		{"cuModuleLoadDataEx", &d.ModuleLoadDataEx, false},
		{"cuModuleUnload", &d.ModuleUnload, false},
		{"cuModuleGetFunction", &d.ModuleGetFunction, false},
		{"cuLaunchKernel", &d.LaunchKernel, false},
		{"cuGetErrorName", &d.GetErrorName, false},
		{"cuGetErrorString", &d.GetErrorString, false},
	}
}

// DefaultPaths are the names Load tries, in order.
var DefaultPaths = []string{"libcuda.so.1", "libcuda.so"}

// Load opens the first library of paths (DefaultPaths when none) that
// loads and binds every required symbol. Errors wrap ErrLoad and name the
// library and the missing symbol or the loader's message.
func Load(paths ...string) (*Driver, error) {
	if len(paths) == 0 {
		paths = DefaultPaths
	}
	var errs []error
	for _, p := range paths {
		d, err := load(p)
		if err == nil {
			return d, nil
		}
		errs = append(errs, err)
	}
	return nil, fmt.Errorf("%w: %w", ErrLoad, errors.Join(errs...))
}

func load(path string) (*Driver, error) {
	h, err := dlopen(path)
	if err != nil {
		return nil, fmt.Errorf("dlopen %s: %v", path, err)
	}
	d := &Driver{Path: path}
	for _, s := range d.symbols() {
		addr, err := dlsym(h, s.name)
		if err != nil || addr == 0 {
			if s.optional {
				continue
			}
			dlclose(h)
			return nil, fmt.Errorf("%s: symbol %s missing", path, s.name)
		}
		register(s.fn, addr)
	}
	return d, nil
}

// ErrorName is the CUresult's enum name (CUDA_ERROR_OUT_OF_MEMORY), from the
// driver when it knows it, else from this package's table.
func (d *Driver) ErrorName(r Result) string {
	if d != nil && d.GetErrorName != nil {
		var p *byte
		if d.GetErrorName(r, &p) == Success && p != nil {
			return cString(p)
		}
	}
	return Name(r)
}

// ErrorString is the driver's description of r, or "" when it has none.
func (d *Driver) ErrorString(r Result) string {
	if d != nil && d.GetErrorString != nil {
		var p *byte
		if d.GetErrorString(r, &p) == Success && p != nil {
			return cString(p)
		}
	}
	return ""
}

// cString copies a NUL-terminated C string.
func cString(p *byte) string {
	var b []byte
	for q := p; *q != 0 && len(b) < 4096; q = (*byte)(unsafe.Add(unsafe.Pointer(q), 1)) {
		b = append(b, *q)
	}
	return string(b)
}
