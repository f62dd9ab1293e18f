package gpu

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
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
// with the device's context made current, in the same locked OS thread
// section: the thread may have had any context current before (other CUDA
// code in the process sets its own).
type cudaDevice struct {
	drv     *cuda.Driver
	dev     int32
	ctx     uintptr
	private bool
	info    Info
	modules []uintptr
	fnRecon uintptr
	fnShift uintptr
	pinned  pinnedSet

	// mu orders driver calls (shared) before Close (exclusive): Close
	// waits for the calls in flight, and later calls see closed and fail
	// with ErrClosed instead of reaching a released context.
	mu        sync.RWMutex
	closed    bool
	closeOnce sync.Once
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
		_ = d.releaseContext() // the failed call is the news
		return err
	}
	if err := d.loadKernels(); err != nil {
		_ = d.teardown()
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

// teardown unloads the kernels and releases the context, in one locked OS
// thread section that first makes the context current: cuModuleUnload acts
// in the current context, and whatever was current on this thread before is
// not ours to trust. When the context cannot be made current the modules
// are left to go with it.
func (d *cudaDevice) teardown() error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	err := cudaErr(d.drv, "cuCtxSetCurrent", d.drv.CtxSetCurrent(d.ctx))
	if err == nil {
		for _, m := range d.modules {
			err = errors.Join(err, cudaErr(d.drv, "cuModuleUnload", d.drv.ModuleUnload(m)))
		}
	}
	d.modules, d.fnRecon, d.fnShift = nil, 0, 0
	return errors.Join(err, d.releaseContext())
}

func (d *cudaDevice) releaseContext() error {
	if d.private {
		if d.drv.CtxDestroy == nil {
			return nil
		}
		return cudaErr(d.drv, "cuCtxDestroy_v2", d.drv.CtxDestroy(d.ctx))
	}
	return cudaErr(d.drv, "cuDevicePrimaryCtxRelease_v2", d.drv.DevicePrimaryCtxRelease(d.dev))
}

// do runs driver calls with the device's context current on this thread.
func (d *cudaDevice) do(call string, f func() cuda.Result) error {
	d.mu.RLock()
	defer d.mu.RUnlock()
	if d.closed {
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

// Close waits for the device's work, unloads the kernels and releases the
// context. It does so once: a later or concurrent Close waits for the first
// and returns nil. The error is the first Close's: a failed
// cuCtxSynchronize (a kernel's fault) or a failed unload or release, the
// rest of the teardown done regardless.
func (d *cudaDevice) Close() error {
	var err error
	d.closeOnce.Do(func() {
		d.mu.Lock()
		defer d.mu.Unlock()
		d.closed = true
		err = errors.Join(d.synchronize(), d.teardown())
	})
	return err
}

// synchronize waits for all work in the context (Close, under d.mu).
func (d *cudaDevice) synchronize() error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := cudaErr(d.drv, "cuCtxSetCurrent", d.drv.CtxSetCurrent(d.ctx)); err != nil {
		return err
	}
	return cudaErr(d.drv, "cuCtxSynchronize", d.drv.CtxSynchronize())
}
