package gpu

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"unsafe"

	"github.com/kvstore/kvstore/gpu/internal/cuda"
	"github.com/kvstore/kvstore/gpu/kernels"
)

// CUDAError is a failed CUDA driver call. It wraps ErrCUDA.
type CUDAError struct {
	Call string // the driver function, e.g. "cuMemAlloc_v2"
	Code int    // the CUresult
	Name string // e.g. "CUDA_ERROR_OUT_OF_MEMORY"
	Text string // the driver's description, e.g. "out of memory"
}

func (e *CUDAError) Error() string {
	s := fmt.Sprintf("kvstore/gpu: %s: CUDA error %d %s", e.Call, e.Code, e.Name)
	if e.Text != "" {
		s += ": " + e.Text
	}
	return s
}

// Unwrap makes errors.Is(err, ErrCUDA) true.
func (e *CUDAError) Unwrap() error { return ErrCUDA }

func cudaErr(drv *cuda.Driver, call string, r cuda.Result) error {
	if r == cuda.Success {
		return nil
	}
	return &CUDAError{Call: call, Code: int(r), Name: drv.ErrorName(r), Text: drv.ErrorString(r)}
}

// CUDAOptions selects a CUDA device. The zero value opens device 0 through
// libcuda.so.1 in its primary context.
type CUDAOptions struct {
	// Ordinal is the device index, as CUDA numbers devices.
	Ordinal int
	// Library is the driver library to load; "" tries libcuda.so.1, then
	// libcuda.so.
	Library string
	// PrivateContext creates a context of our own (cuCtxCreate_v2) instead
	// of retaining the device's primary context. The primary context is
	// the one the CUDA runtime uses, so device addresses from other CUDA
	// code in the process (the server's KV buffers) are valid in it.
	PrivateContext bool
}

// cudaDevice is a Device on the CUDA driver API. Every driver call runs
// with the device's context current on a locked OS thread.
type cudaDevice struct {
	drv     *cuda.Driver
	dev     int32
	ctx     uintptr
	private bool
	info    Info
	modules []uintptr
	fnRecon uintptr
	fnShift uintptr
	closed  atomic.Bool
	pinned  pinnedSet
}

// OpenCUDA opens a CUDA device. Errors wrap ErrNoDevice when there is no
// usable device (and then also the CUDAError or loader error that says
// why), ErrCUDA when a later step fails.
func OpenCUDA(o CUDAOptions) (Device, error) {
	var paths []string
	if o.Library != "" {
		paths = []string{o.Library}
	}
	drv, err := cuda.Load(paths...)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNoDevice, err)
	}
	d := &cudaDevice{drv: drv, private: o.PrivateContext}
	if err := d.probe(o.Ordinal); err != nil {
		return nil, err
	}
	if err := d.open(); err != nil {
		return nil, err
	}
	return d, nil
}

// probe initialises the driver and describes the device.
func (d *cudaDevice) probe(ordinal int) error {
	drv := d.drv
	noDev := func(err error) error { return fmt.Errorf("%w: %w", ErrNoDevice, err) }
	if err := cudaErr(drv, "cuInit", drv.Init(0)); err != nil {
		return noDev(err)
	}
	var n, ver int32
	if err := cudaErr(drv, "cuDeviceGetCount", drv.DeviceGetCount(&n)); err != nil {
		return noDev(err)
	}
	if ordinal < 0 || ordinal >= int(n) {
		return fmt.Errorf("%w: device %d requested, %d present", ErrNoDevice, ordinal, n)
	}
	if err := cudaErr(drv, "cuDeviceGet", drv.DeviceGet(&d.dev, int32(ordinal))); err != nil {
		return noDev(err)
	}
	var name [256]byte
	var major, minor, sms int32
	var mem uint64
	for _, c := range []struct {
		call string
		r    func() cuda.Result
	}{
		{"cuDriverGetVersion", func() cuda.Result { return drv.DriverGetVersion(&ver) }},
		{"cuDeviceGetName", func() cuda.Result { return drv.DeviceGetName(&name[0], int32(len(name)), d.dev) }},
		{"cuDeviceGetAttribute", func() cuda.Result { return drv.DeviceGetAttribute(&major, cuda.AttrComputeCapabilityMajor, d.dev) }},
		{"cuDeviceGetAttribute", func() cuda.Result { return drv.DeviceGetAttribute(&minor, cuda.AttrComputeCapabilityMinor, d.dev) }},
		{"cuDeviceGetAttribute", func() cuda.Result { return drv.DeviceGetAttribute(&sms, cuda.AttrMultiprocessorCount, d.dev) }},
		{"cuDeviceTotalMem_v2", func() cuda.Result { return drv.DeviceTotalMem(&mem, d.dev) }},
	} {
		if err := cudaErr(drv, c.call, c.r()); err != nil {
			return noDev(err)
		}
	}
	nameLen := 0
	for nameLen < len(name) && name[nameLen] != 0 {
		nameLen++
	}
	d.info = Info{
		Kind: KindCUDA, Name: string(name[:nameLen]), ComputeCapability: int(major*10 + minor),
		MemoryBytes: int64(mem), Multiprocessors: int(sms), DriverVersion: int(ver),
	}
	if _, err := kernels.Arch(d.info.ComputeCapability); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrNoDevice, d.info.Name, err)
	}
	return nil
}

// open creates or retains the context and loads the kernels.
func (d *cudaDevice) open() error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	drv := d.drv
	if d.private {
		if drv.CtxCreate == nil {
			return fmt.Errorf("%w: %s has no cuCtxCreate_v2 for a private context", ErrNoDevice, drv.Path)
		}
		if err := cudaErr(drv, "cuCtxCreate_v2", drv.CtxCreate(&d.ctx, 0, d.dev)); err != nil {
			return err
		}
	} else if err := cudaErr(drv, "cuDevicePrimaryCtxRetain", drv.DevicePrimaryCtxRetain(&d.ctx, d.dev)); err != nil {
		return err
	}
	if err := cudaErr(drv, "cuCtxSetCurrent", drv.CtxSetCurrent(d.ctx)); err != nil {
		d.releaseContext()
		return err
	}
	if err := d.loadKernels(); err != nil {
		d.unloadKernels()
		d.releaseContext()
		return err
	}
	return nil
}

func (d *cudaDevice) loadKernels() error {
	arch, err := kernels.Arch(d.info.ComputeCapability)
	if err != nil {
		return err
	}
	for _, m := range kernels.Modules {
		ptx, err := kernels.PTX(m, arch)
		if err != nil {
			return err
		}
		mod, err := d.loadModule(ptx, kernels.PTXName(m, arch))
		if err != nil {
			return err
		}
		d.modules = append(d.modules, mod)
		var fn uintptr
		if err := cudaErr(d.drv, "cuModuleGetFunction("+m.Entry+")", d.drv.ModuleGetFunction(&fn, mod, m.Entry)); err != nil {
			return err
		}
		switch m.Entry {
		case "kvs_reconstruct":
			d.fnRecon = fn
		case "kvs_shift":
			d.fnShift = fn
		}
	}
	if d.fnRecon == 0 || d.fnShift == 0 {
		return fmt.Errorf("%w: kernel modules lack an entry point", ErrCUDA)
	}
	return nil
}

// loadModule JIT-compiles PTX; a failure carries the JIT's error log.
func (d *cudaDevice) loadModule(ptx []byte, name string) (uintptr, error) {
	logBuf := make([]byte, 8192)
	var pin runtime.Pinner
	pin.Pin(&logBuf[0])
	pin.Pin(&ptx[0])
	defer pin.Unpin()
	opts := []int32{cuda.JITErrorLogBuffer, cuda.JITErrorLogBufferSizeBytes}
	vals := []uintptr{uintptr(unsafe.Pointer(&logBuf[0])), uintptr(len(logBuf))}
	var mod uintptr
	r := d.drv.ModuleLoadDataEx(&mod, unsafe.Pointer(&ptx[0]), uint32(len(opts)), &opts[0], &vals[0])
	if err := cudaErr(d.drv, "cuModuleLoadDataEx("+name+")", r); err != nil {
		if n := indexNUL(logBuf); n > 0 {
			return 0, fmt.Errorf("%w; JIT log: %s", err, logBuf[:n])
		}
		return 0, err
	}
	return mod, nil
}

func indexNUL(b []byte) int {
	for i, c := range b {
		if c == 0 {
			return i
		}
	}
	return len(b)
}

func (d *cudaDevice) unloadKernels() {
	for _, m := range d.modules {
		d.drv.ModuleUnload(m)
	}
	d.modules = nil
}

func (d *cudaDevice) releaseContext() {
	if d.private {
		if d.drv.CtxDestroy != nil {
			d.drv.CtxDestroy(d.ctx)
		}
		return
	}
	d.drv.DevicePrimaryCtxRelease(d.dev)
}

// do runs driver calls with the device's context current on this thread.
func (d *cudaDevice) do(call string, f func() cuda.Result) error {
	if d.closed.Load() {
		return fmt.Errorf("%w: cuda device: %s", ErrClosed, call)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := cudaErr(d.drv, "cuCtxSetCurrent", d.drv.CtxSetCurrent(d.ctx)); err != nil {
		return err
	}
	return cudaErr(d.drv, call, f())
}

func (d *cudaDevice) Info() Info { return d.info }

func (d *cudaDevice) NewStream() (Stream, error) {
	var s uintptr
	if err := d.do("cuStreamCreate", func() cuda.Result { return d.drv.StreamCreate(&s, cuda.StreamNonBlocking) }); err != nil {
		return nil, err
	}
	return &cudaStream{d: d, s: s}, nil
}

func (d *cudaDevice) NewEvent() (Event, error) {
	var e uintptr
	if err := d.do("cuEventCreate", func() cuda.Result { return d.drv.EventCreate(&e, cuda.EventBlockingSync) }); err != nil {
		return nil, err
	}
	return &cudaEvent{d: d, e: e}, nil
}

func (d *cudaDevice) Close() error {
	if d.closed.Load() {
		return nil
	}
	err := d.do("cuCtxSynchronize", func() cuda.Result { return d.drv.CtxSynchronize() })
	runtime.LockOSThread()
	d.unloadKernels()
	d.releaseContext()
	runtime.UnlockOSThread()
	d.closed.Store(true)
	return err
}
