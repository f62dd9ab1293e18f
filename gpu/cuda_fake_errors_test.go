//go:build linux

package gpu

import (
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/kvstore/kvstore/format"
)

// Failures injected into the fake driver (fake_fail_next: the next call of
// one entry point returns a code and does nothing) reach the caller as a
// *CUDAError naming the call, with the code's name and description from the
// driver, and leave nothing behind. The Close tests use the fake's records
// of which context was current at each cuModuleUnload and of every release.

// wantCUDAError checks that err is a *CUDAError for call with code, and
// returns it.
func wantCUDAError(t *testing.T, err error, call string, code int) *CUDAError {
	t.Helper()
	var ce *CUDAError
	if !errors.As(err, &ce) || !errors.Is(err, ErrCUDA) {
		t.Fatalf("%s: error %v is not a *CUDAError wrapping ErrCUDA", call, err)
	}
	if ce.Call != call || ce.Code != code {
		t.Fatalf("error %v: call %q code %d, want %q code %d", err, ce.Call, ce.Code, call, code)
	}
	return ce
}

// faultScene is what the injected calls act on.
type faultScene struct {
	dev    Device
	s      Stream
	e0, e1 Event
	buf    Buffer
	pinned HostBuffer
	// pageable is Go memory a copy that failed to wait may still write:
	// it lives as long as the test.
	pageable []byte
	shift    ShiftLaunch
	recon    ReconstructLaunch
}

func newFaultScene(t *testing.T, dev Device) *faultScene {
	sc := &faultScene{dev: dev, s: mustStream(t, dev), e0: mustEvent(t, dev), e1: mustEvent(t, dev), buf: mustAlloc(t, dev, 64),
		pageable: make([]byte, 64)}
	t.Cleanup(func() {
		for _, c := range []interface{ Close() error }{sc.s, sc.e0, sc.e1} {
			must(t, c.Close())
		}
		must(t, dev.FreeHost(sc.pinned))
	})
	var err error
	sc.pinned, err = dev.AllocHost(64)
	must(t, err)
	lay := Layout{Kind: LayoutHND, DType: format.DTypeBF16, Heads: 1, HeadDim: 8, Tokens: 4}
	sc.shift = ShiftLaunch{Layout: lay, Dst: mustAlloc(t, dev, lay.Bytes()), Src: mustAlloc(t, dev, lay.Bytes()),
		SrcDType: format.DTypeBF16, Tokens: 4}
	sc.recon = ReconstructLaunch{Layout: lay, Dst: sc.shift.Dst, Jobs: mustAlloc(t, dev, JobSize), NumJobs: 1, MaxRows: 4}
	must(t, sc.s.Record(sc.e0))
	must(t, sc.s.Record(sc.e1))
	must(t, sc.s.Synchronize())
	return sc
}

func TestFakeCUDAErrors(t *testing.T) {
	dev, ctl := openFake(t, CUDAOptions{})
	sc := newFaultScene(t, dev)
	for _, c := range []struct {
		inject string // entry point that fails
		code   int32
		call   string // CUDAError.Call
		op     func() error
	}{
		{"cuMemAlloc_v2", 1, "cuMemAlloc_v2", func() error { _, err := dev.Alloc(64); return err }},
		{"cuMemFree_v2", 1, "cuMemFree_v2", func() error { return dev.Free(mustAlloc(t, dev, 64)) }},
		{"cuMemHostAlloc", 2, "cuMemHostAlloc", func() error { _, err := dev.AllocHost(64); return err }},
		{"cuMemFreeHost", 1, "cuMemFreeHost", func() error {
			h, err := dev.AllocHost(64)
			must(t, err)
			return dev.FreeHost(h)
		}},
		{"cuStreamCreate", 999, "cuStreamCreate", func() error { _, err := dev.NewStream(); return err }},
		{"cuStreamDestroy_v2", 400, "cuStreamDestroy_v2", func() error { return mustStream(t, dev).Close() }},
		{"cuEventCreate", 999, "cuEventCreate", func() error { _, err := dev.NewEvent(); return err }},
		{"cuEventDestroy_v2", 400, "cuEventDestroy_v2", func() error { return mustEvent(t, dev).Close() }},
		{"cuMemcpyHtoDAsync_v2", 1, "cuMemcpyHtoDAsync_v2", func() error { return sc.s.CopyHtoD(sc.buf, sc.pinned.Bytes()) }},
		{"cuMemcpyDtoHAsync_v2", 1, "cuMemcpyDtoHAsync_v2", func() error { return sc.s.CopyDtoH(sc.pinned.Bytes(), sc.buf) }},
		// A pageable copy waits for its stream inside the same call.
		{"cuStreamSynchronize", 700, "cuMemcpyDtoHAsync_v2", func() error { return sc.s.CopyDtoH(sc.pageable, sc.buf) }},
		{"cuMemcpyDtoDAsync_v2", 1, "cuMemcpyDtoDAsync_v2", func() error { return sc.s.CopyDtoD(sc.buf, sc.buf) }},
		{"cuMemsetD8Async", 1, "cuMemsetD8Async", func() error { return sc.s.Memset(sc.buf, 7) }},
		{"cuEventRecord", 400, "cuEventRecord", func() error { return sc.s.Record(sc.e1) }},
		{"cuStreamWaitEvent", 400, "cuStreamWaitEvent", func() error { return sc.s.Wait(sc.e0) }},
		{"cuStreamSynchronize", 700, "cuStreamSynchronize", sc.s.Synchronize},
		{"cuEventSynchronize", 719, "cuEventSynchronize", sc.e1.Synchronize},
		{"cuEventElapsedTime", 600, "cuEventElapsedTime", func() error { _, err := sc.e1.Elapsed(sc.e0); return err }},
		{"cuLaunchKernel", 1, "cuLaunchKernel(kvs_shift)", func() error { return sc.s.Shift(&sc.shift) }},
		{"cuLaunchKernel", 701, "cuLaunchKernel(kvs_reconstruct)", func() error { return sc.s.Reconstruct(&sc.recon) }},
		{"cuCtxSetCurrent", 201, "cuCtxSetCurrent", func() error { _, err := dev.Alloc(64); return err }},
	} {
		ctl.failNext(c.inject, c.code)
		ce := wantCUDAError(t, c.op(), c.call, int(c.code))
		if n := ctl.stat("injected:" + c.inject); n != 1 {
			t.Fatalf("%s: the injected failure was taken %d times", c.inject, n)
		}
		text := map[int32]string{1: "invalid argument", 2: "out of memory", 201: "invalid device context", 400: "invalid resource handle",
			600: "device not ready", 700: "an illegal memory access was encountered", 719: "unspecified launch failure", 999: "unknown error"}[c.code]
		if ce.Name == "" || strings.HasPrefix(ce.Name, "CUresult(") || ce.Text != text {
			t.Errorf("%s: name %q text %q; want the driver's name and %q", c.call, ce.Name, ce.Text, text)
		}
		must(t, sc.s.Synchronize()) // nothing left in flight on the scene's memory
		ctl.reset()
	}
	// The stream still works after all that.
	must(t, sc.s.CopyHtoD(sc.buf, make([]byte, 64)))
	must(t, sc.s.Synchronize())
}

// TestFakeCUDAErrorNames: out of memory is ErrBudget; a code the driver
// cannot name gets the built-in name and no text; when cuGetErrorName
// fails the built-in table names the code and the text still comes from
// the driver.
func TestFakeCUDAErrorNames(t *testing.T) {
	dev, ctl := openFake(t, CUDAOptions{})
	ctl.failNext("cuMemAlloc_v2", 2)
	_, err := dev.Alloc(64)
	ce := wantCUDAError(t, err, "cuMemAlloc_v2", 2)
	if !errors.Is(err, ErrBudget) || ce.Name != "CUDA_ERROR_OUT_OF_MEMORY" || ce.Text != "out of memory" {
		t.Fatalf("out of memory: %v", err)
	}
	ctl.failNext("cuMemAlloc_v2", 12345)
	_, err = dev.Alloc(64)
	if ce := wantCUDAError(t, err, "cuMemAlloc_v2", 12345); ce.Name != "CUresult(12345)" || ce.Text != "" {
		t.Fatalf("unknown code: name %q text %q", ce.Name, ce.Text)
	}
	ctl.failNext("cuMemAlloc_v2", 101)
	ctl.failNext("cuGetErrorName", 1)
	_, err = dev.Alloc(64)
	if ce := wantCUDAError(t, err, "cuMemAlloc_v2", 101); ce.Name != "CUDA_ERROR_INVALID_DEVICE" || ce.Text != "invalid device ordinal" {
		t.Fatalf("cuGetErrorName failing: name %q text %q", ce.Name, ce.Text)
	}
	ctl.expect(t, map[string]int64{"injected:cuGetErrorName": 1})
}

// TestFakeCUDAOpenErrors: a failure at any step of OpenCUDA is an error (an
// ErrNoDevice one while probing the device) and leaves no context retained
// and no module loaded.
func TestFakeCUDAOpenErrors(t *testing.T) {
	lib, ctl := fakeDriver(t)
	for _, c := range []struct {
		inject   string
		code     int32
		private  bool
		noDevice bool   // wraps ErrNoDevice
		text     string // in the message
	}{
		{"cuInit", 100, false, true, "cuInit: CUDA error 100 CUDA_ERROR_NO_DEVICE: no CUDA-capable device is detected"},
		{"cuDeviceGetCount", 3, false, true, "cuDeviceGetCount"},
		{"cuDeviceGet", 101, false, true, "cuDeviceGet"},
		{"cuDriverGetVersion", 999, false, true, "cuDriverGetVersion"},
		{"cuDeviceGetName", 999, false, true, "cuDeviceGetName"},
		{"cuDeviceGetAttribute", 1, false, true, "cuDeviceGetAttribute"},
		{"cuDeviceTotalMem_v2", 1, false, true, "cuDeviceTotalMem_v2"},
		{"cuDevicePrimaryCtxRetain", 201, false, false, "cuDevicePrimaryCtxRetain"},
		{"cuCtxCreate_v2", 2, true, false, "cuCtxCreate_v2"},
		{"cuCtxSetCurrent", 201, false, false, "cuCtxSetCurrent"},
		{"cuCtxSetCurrent", 201, true, false, "cuCtxSetCurrent"},
		{"cuModuleLoadDataEx", 218, false, false, "cuModuleLoadDataEx(reconstruct.compute_90.ptx): CUDA error 218 CUDA_ERROR_INVALID_PTX: a PTX JIT compilation failed; JIT log: fake JIT: injected failure 218"},
		{"cuModuleGetFunction", 500, false, false, "cuModuleGetFunction(kvs_reconstruct): CUDA error 500 CUDA_ERROR_NOT_FOUND"},
		{"cuModuleGetFunction", 500, true, false, "cuModuleGetFunction(kvs_reconstruct)"},
	} {
		t.Run(c.inject, func(t *testing.T) {
			ctl.reset()
			ctl.failNext(c.inject, c.code)
			dev, err := OpenCUDA(CUDAOptions{Library: lib, PrivateContext: c.private})
			if dev != nil || err == nil || errors.Is(err, ErrNoDevice) != c.noDevice || !errors.Is(err, ErrCUDA) || !strings.Contains(err.Error(), c.text) {
				t.Errorf("%s failing (private %v): %v, %v; want ErrCUDA (ErrNoDevice %v) saying %q", c.inject, c.private, dev, err, c.noDevice, c.text)
			}
			ctl.expect(t, map[string]int64{"injected:" + c.inject: 1, "primary:refs": 0, "live:ctx": 0, "live:module": 0,
				"unload:no_ctx": 0, "release:bad": 0, "destroy:bad": 0})
		})
	}
}

// TestFakeCUDACloseMakesContextCurrent: Close unloads the modules with the
// device's own context current even when, after its cuCtxSynchronize, no
// thread has a context current any more (the fake drops them, as other
// CUDA code in the process may switch contexts between our calls); with two
// devices of different contexts each unload happens in its own.
func TestFakeCUDACloseMakesContextCurrent(t *testing.T) {
	lib, ctl := fakeDriver(t)
	a, err := OpenCUDA(CUDAOptions{Library: lib})
	must(t, err)
	b, err := OpenCUDA(CUDAOptions{Library: lib, PrivateContext: true})
	must(t, err)
	mustAlloc(t, a, 64)
	mustAlloc(t, b, 64) // b's context is the last made current here
	ctl.dropCurrentAfter("cuCtxSynchronize")
	must(t, a.Close())
	must(t, b.Close())
	ctl.expect(t, map[string]int64{"calls:cuCtxSynchronize": 2, "unload:ok": 4, "unload:no_ctx": 0, "unload:wrong_ctx": 0,
		"reclaimed:module": 0, "release:ok": 1, "destroy:ok": 1, "live:ctx": 0})
}

// TestFakeCUDACloseOnce: a second Close returns nil and calls nothing;
// every later use of the device is ErrClosed.
func TestFakeCUDACloseOnce(t *testing.T) {
	dev, ctl := openFake(t, CUDAOptions{})
	s, e, buf := mustStream(t, dev), mustEvent(t, dev), mustAlloc(t, dev, 64)
	h, err := dev.AllocHost(64)
	must(t, err)
	must(t, dev.Close())
	must(t, dev.Close())
	ctl.expect(t, map[string]int64{"calls:cuCtxSynchronize": 1, "calls:cuModuleUnload": 2, "release:ok": 1, "release:bad": 0})
	for _, tc := range []struct {
		name string
		op   func() error
	}{
		{"Alloc", func() error { _, err := dev.Alloc(64); return err }},
		{"Free", func() error { return dev.Free(buf) }},
		{"AllocHost", func() error { _, err := dev.AllocHost(64); return err }},
		{"FreeHost", func() error { return dev.FreeHost(h) }},
		{"NewStream", func() error { _, err := dev.NewStream(); return err }},
		{"NewEvent", func() error { _, err := dev.NewEvent(); return err }},
		{"Copy", func() error { return s.CopyHtoD(buf, make([]byte, 64)) }},
		{"Synchronize", s.Synchronize},
		{"Record", func() error { return s.Record(e) }},
		{"Event", e.Synchronize},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.op(); !errors.Is(err, ErrClosed) {
				t.Errorf("%s after Close: %v, want ErrClosed", tc.name, err)
			}
		})
	}
}

// TestFakeCUDACloseConcurrent: Close from many goroutines while others
// still allocate tears down once; the others see ErrClosed. Slow work left
// on a stream keeps the first Close in cuCtxSynchronize for about 20 ms, so
// the other Close calls arrive while it is still tearing down. Run it under
// -race.
func TestFakeCUDACloseConcurrent(t *testing.T) {
	dev, ctl := openFake(t, CUDAOptions{})
	s, buf := mustStream(t, dev), mustAlloc(t, dev, 64)
	ctl.setDelayUS(2000)
	for range 10 {
		must(t, s.Memset(buf, 1))
	}
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for range 4 {
		wg.Go(func() {
			for {
				b, err := dev.Alloc(256)
				if err == nil {
					err = dev.Free(b)
				}
				if err != nil {
					if !errors.Is(err, ErrClosed) {
						errs <- err
					}
					return
				}
			}
		})
	}
	for range 8 {
		wg.Go(func() {
			if err := dev.Close(); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	ctl.expect(t, map[string]int64{"calls:cuCtxSynchronize": 1, "calls:cuModuleUnload": 2, "unload:ok": 2,
		"release:ok": 1, "release:bad": 0, "free:bad": 0})
}

// TestFakeCUDACloseReportsFailure: a failed step of Close is its error, and
// the rest of the teardown still happens.
func TestFakeCUDACloseReportsFailure(t *testing.T) {
	lib, ctl := fakeDriver(t)
	for _, c := range []struct {
		inject string
		code   int32
		want   map[string]int64
	}{
		{"cuCtxSetCurrent", 201, map[string]int64{"calls:cuCtxSynchronize": 0, "unload:ok": 2, "release:ok": 1}},
		{"cuModuleUnload", 400, map[string]int64{"unload:ok": 1, "release:ok": 1, "reclaimed:module": 1}},
		{"cuDevicePrimaryCtxRelease_v2", 201, map[string]int64{"unload:ok": 2, "primary:refs": 1}},
	} {
		t.Run(c.inject, func(t *testing.T) {
			ctl.reset()
			dev, err := OpenCUDA(CUDAOptions{Library: lib})
			must(t, err)
			ctl.failNext(c.inject, c.code)
			var ce *CUDAError
			if err := dev.Close(); !errors.As(err, &ce) || ce.Code != int(c.code) || !strings.Contains(err.Error(), c.inject) {
				t.Errorf("Close with %s failing: %v", c.inject, err)
			}
			ctl.expect(t, c.want)
			if err := dev.Close(); err != nil {
				t.Errorf("second Close after a failed one: %v", err)
			}
		})
	}
	// The injected release failure left the primary context retained.
	ctl.reset()
	dev, err := OpenCUDA(CUDAOptions{Library: lib})
	must(t, err)
	d := dev.(*cudaDevice)
	must(t, d.Close())
	must(t, d.releaseContext())
	ctl.expect(t, map[string]int64{"primary:refs": 0, "live:module": 0})
}

// TestFakeCUDAArgumentErrors: bad arguments are ErrInvalidArgument and
// empty work is nil, both without a driver call.
func TestFakeCUDAArgumentErrors(t *testing.T) {
	dev, ctl := openFake(t, CUDAOptions{})
	sc := newFaultScene(t, dev)
	cpu := CPU()
	foreign := mustAlloc(t, cpu, 64)
	cpuHost, err := cpu.AllocHost(64)
	must(t, err)
	cpuEv := mustEvent(t, cpu)
	sub, _ := sc.buf.Sub(0, 32)
	s := sc.s
	ctl.reset()
	for _, tc := range []struct {
		name string
		op   func() error
	}{
		{"Alloc(0)", func() error { _, err := dev.Alloc(0); return err }},
		{"AllocHost(-1)", func() error { _, err := dev.AllocHost(-1); return err }},
		{"Free(cpu)", func() error { return dev.Free(foreign) }},
		{"Free(empty)", func() error { return dev.Free(Buffer{}) }},
		{"FreeHost(cpu)", func() error { return dev.FreeHost(cpuHost) }},
		{"FreeHost(empty)", func() error { return dev.FreeHost(HostBuffer{}) }},
		{"CopyHtoD(cpu)", func() error { return s.CopyHtoD(foreign, make([]byte, 64)) }},
		{"CopyHtoD(short)", func() error { return s.CopyHtoD(sc.buf, make([]byte, 63)) }},
		{"CopyDtoH(cpu)", func() error { return s.CopyDtoH(make([]byte, 64), foreign) }},
		{"CopyDtoH(long)", func() error { return s.CopyDtoH(make([]byte, 65), sc.buf) }},
		{"CopyDtoD(cpu)", func() error { return s.CopyDtoD(sc.buf, foreign) }},
		{"CopyDtoD(sizes)", func() error { return s.CopyDtoD(sc.buf, sub) }},
		{"Memset(cpu)", func() error { return s.Memset(foreign, 1) }},
		{"Record(cpu)", func() error { return s.Record(cpuEv) }},
		{"Wait(cpu)", func() error { return s.Wait(cpuEv) }},
		{"Reconstruct(zero)", func() error { return s.Reconstruct(&ReconstructLaunch{}) }},
		{"Shift(cpu src)", func() error {
			l := sc.shift
			l.Src = foreign
			return s.Shift(&l)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.op(); !errors.Is(err, ErrInvalidArgument) {
				t.Errorf("%s: %v, want ErrInvalidArgument", tc.name, err)
			}
		})
	}
	for _, tc := range []struct {
		name string
		op   func() error
	}{
		{"CopyHtoD(empty)", func() error { return s.CopyHtoD(Buffer{}, nil) }},
		{"CopyDtoH(empty)", func() error { return s.CopyDtoH(nil, Buffer{}) }},
		{"CopyDtoD(empty)", func() error { return s.CopyDtoD(Buffer{}, Buffer{}) }},
		{"Memset(empty)", func() error { return s.Memset(Buffer{}, 1) }},
		{"Reconstruct(0 job)", func() error { l := sc.recon; l.NumJobs = 0; return s.Reconstruct(&l) }},
		{"Shift(0 tokens)", func() error { l := sc.shift; l.Tokens, l.Src = 0, Buffer{}; return s.Shift(&l) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.op(); err != nil {
				t.Errorf("%s: %v, want nil", tc.name, err)
			}
		})
	}
	for _, call := range []string{"cuMemAlloc_v2", "cuMemFree_v2", "cuMemHostAlloc", "cuMemFreeHost", "cuMemcpyHtoDAsync_v2",
		"cuMemcpyDtoHAsync_v2", "cuMemcpyDtoDAsync_v2", "cuMemsetD8Async", "cuEventRecord", "cuStreamWaitEvent", "cuLaunchKernel"} {
		if n := ctl.stat("calls:" + call); n != 0 {
			t.Errorf("%s called %d times for bad or empty arguments", call, n)
		}
	}
}
