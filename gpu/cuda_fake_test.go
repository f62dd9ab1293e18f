//go:build linux

package gpu

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/ebitengine/purego"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/gpu/kernels"
	"github.com/kvstore/kvstore/internal/testenv"
)

// The CUDA device (cuda*.go) runs here on a fake driver: testdata/
// cuda-fake.cc, built with g++ into a shared library that exports the cu*
// symbols over host memory, with stream worker threads, events, PTX module
// loading and kernel launches that run the .cu kernels compiled for the
// host. The binding loads it through CUDAOptions.Library exactly as it loads
// libcuda.so.1: purego marshals every argument, the fake checks them, and the
// kernels' results are compared with the CPU reference. The test controls
// (fake_*) are called through purego as well.

var fake struct {
	once sync.Once
	lib  string
	ctl  fakeControls
	err  error
}

// fakeControls are the fake driver's test entry points.
type fakeControls struct {
	reset            func()
	failNext         func(name string, code int32)
	dropCurrentAfter func(name string)
	setDevice        func(count, cc, sms int32, mem uint64)
	setDelayUS       func(us int32)
	stat             func(key string) int64
}

// fakeDriver builds the fake driver once per test binary, resets its
// counters and settings, and returns its path and controls.
func fakeDriver(t *testing.T) (string, *fakeControls) {
	t.Helper()
	gxx := testenv.GxxPath(t)
	fake.once.Do(func() {
		fake.lib, fake.err = compileHost(gxx, "cuda-fake.cc", "libcuda-fake.so", "-shared", "-fPIC", "-pthread")
		if fake.err != nil {
			return
		}
		h, err := purego.Dlopen(fake.lib, purego.RTLD_NOW|purego.RTLD_GLOBAL)
		if err != nil {
			fake.err = fmt.Errorf("dlopen %s: %w", fake.lib, err)
			return
		}
		c := &fake.ctl
		for name, fn := range map[string]any{
			"fake_reset": &c.reset, "fake_fail_next": &c.failNext, "fake_drop_current_after": &c.dropCurrentAfter,
			"fake_set_device": &c.setDevice, "fake_set_delay_us": &c.setDelayUS, "fake_stat": &c.stat,
		} {
			purego.RegisterLibFunc(fn, h, name)
		}
	})
	if fake.err != nil {
		t.Fatal(fake.err)
	}
	fake.ctl.reset()
	return fake.lib, &fake.ctl
}

// openFake opens the CUDA device on the fake driver with o (Library set
// here). At cleanup it closes the device (again, if the test did) and
// checks that the context is gone with every module unloaded in it.
func openFake(t *testing.T, o CUDAOptions) (Device, *fakeControls) {
	t.Helper()
	lib, ctl := fakeDriver(t)
	o.Library = lib
	dev, err := OpenCUDA(o)
	if err != nil {
		t.Fatalf("OpenCUDA on the fake driver: %v", err)
	}
	t.Cleanup(func() {
		if err := dev.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		ctl.expect(t, map[string]int64{"live:ctx": 0, "live:module": 0, "live:stream": 0, "primary:refs": 0,
			"unload:no_ctx": 0, "unload:wrong_ctx": 0, "reclaimed:module": 0, "release:bad": 0, "free:bad": 0, "hostfree:bad": 0})
	})
	return dev, ctl
}

// expect checks fake_stat counters.
func (c *fakeControls) expect(t *testing.T, want map[string]int64) {
	t.Helper()
	for k, v := range want {
		if got := c.stat(k); got != v {
			t.Errorf("fake driver %s = %d, want %d", k, got, v)
		}
	}
}

func TestFakeCUDAOpen(t *testing.T) {
	dev, ctl := openFake(t, CUDAOptions{})
	want := Info{Kind: KindCUDA, Name: "kvstore fake CUDA device 0 (host memory)", ComputeCapability: 90,
		MemoryBytes: 256 << 20, Multiprocessors: 4, DriverVersion: 12040}
	if got := dev.Info(); got != want {
		t.Fatalf("Info = %+v, want %+v", got, want)
	}
	// Both kernels' compute_90 PTX was loaded whole and their functions
	// found.
	var ptxBytes int64
	for _, m := range kernels.Modules {
		ptx, err := kernels.PTX(m, 90)
		must(t, err)
		ptxBytes += int64(len(ptx) - 1) // without the NUL
	}
	ctl.expect(t, map[string]int64{"live:module": 2, "module:target": 90, "module:bytes": ptxBytes,
		"calls:cuModuleGetFunction": 2, "primary:refs": 1})
	if err := dev.Close(); err != nil {
		t.Fatal(err)
	}
	ctl.expect(t, map[string]int64{"unload:ok": 2, "release:ok": 1, "live:ctx": 0})
}

// TestFakeCUDAOpenPicksPTX: a compute capability 8.6 device gets the
// compute_80 PTX; 7.5 and no device at all are ErrNoDevice.
func TestFakeCUDAOpenPicksPTX(t *testing.T) {
	lib, ctl := fakeDriver(t)
	ctl.setDevice(1, 86, 2, 64<<20)
	dev, err := OpenCUDA(CUDAOptions{Library: lib})
	if err != nil {
		t.Fatal(err)
	}
	ctl.expect(t, map[string]int64{"module:target": 80})
	if cc := dev.Info().ComputeCapability; cc != 86 {
		t.Fatalf("compute capability %d, want 86", cc)
	}
	if err := dev.Close(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		count, cc int32
		ordinal   int
		text      string
	}{
		{1, 75, 0, "compute capability 7.5"},
		{0, 90, 0, "device 0 requested, 0 present"},
		{1, 90, 1, "device 1 requested, 1 present"},
	} {
		ctl.setDevice(c.count, c.cc, 2, 64<<20)
		dev, err := OpenCUDA(CUDAOptions{Library: lib, Ordinal: c.ordinal})
		if dev != nil || !errors.Is(err, ErrNoDevice) || !strings.Contains(err.Error(), c.text) {
			t.Errorf("%d devices of cc %d, ordinal %d: %v, %v; want ErrNoDevice saying %q", c.count, c.cc, c.ordinal, dev, err, c.text)
		}
	}
	ctl.expect(t, map[string]int64{"primary:refs": 0, "live:module": 0})
}

// TestFakeCUDAPrivateContext: PrivateContext creates and destroys a context
// of its own and never touches the primary one.
func TestFakeCUDAPrivateContext(t *testing.T) {
	dev, ctl := openFake(t, CUDAOptions{PrivateContext: true})
	ctl.expect(t, map[string]int64{"calls:cuCtxCreate_v2": 1, "primary:refs": 0, "live:ctx": 1})
	checkMemory(t, dev)
	if err := dev.Close(); err != nil {
		t.Fatal(err)
	}
	ctl.expect(t, map[string]int64{"destroy:ok": 1, "unload:ok": 2, "calls:cuDevicePrimaryCtxRetain": 0})
}

func TestFakeCUDAMemory(t *testing.T) {
	dev, ctl := openFake(t, CUDAOptions{})
	checkMemory(t, dev)
	ctl.expect(t, map[string]int64{"free:ok": 2, "hostfree:ok": 1, "live:mem": 0, "live:host": 0, "live:stream": 0})
	if _, err := dev.Alloc(300 << 20); !errors.Is(err, ErrBudget) {
		t.Fatalf("Alloc beyond the device's 256 MiB: %v, want ErrBudget", err)
	}
	// Free refuses what is not a whole allocation of ours; the driver
	// refuses a second free.
	a, err := dev.Alloc(1000)
	if err != nil {
		t.Fatal(err)
	}
	sub, _ := a.Sub(8, 100)
	w, err := WrapDevice(dev, a.Ptr(), a.Len())
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range []Buffer{sub, w} {
		if err := dev.Free(b); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("Free of a sub-buffer or a wrapped buffer: %v, want ErrInvalidArgument", err)
		}
	}
	if _, err := WrapDevice(dev, 0, 10); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("WrapDevice at 0: %v", err)
	}
	if err := dev.Free(a); err != nil {
		t.Fatal(err)
	}
	var ce *CUDAError
	if err := dev.Free(a); !errors.As(err, &ce) || ce.Call != "cuMemFree_v2" || ce.Name != "CUDA_ERROR_INVALID_VALUE" {
		t.Fatalf("second Free: %v, want the driver's CUDA_ERROR_INVALID_VALUE", err)
	}
	ctl.expect(t, map[string]int64{"free:bad": 1})
	ctl.reset() // the bad free was the test's
}

// TestFakeCUDAStreamOrder: with every stream operation slowed down, a
// stream that waits for another's event sees that stream's copy, and one
// that does not wait does not: the fake runs streams asynchronously, and
// Wait reaches cuStreamWaitEvent.
func TestFakeCUDAStreamOrder(t *testing.T) {
	dev, ctl := openFake(t, CUDAOptions{})
	const n = 1 << 16
	a, b, c := mustAlloc(t, dev, n), mustAlloc(t, dev, n), mustAlloc(t, dev, n)
	src, err := dev.AllocHost(n)
	if err != nil {
		t.Fatal(err)
	}
	defer dev.FreeHost(src)
	dst, err := dev.AllocHost(2 * n)
	if err != nil {
		t.Fatal(err)
	}
	defer dev.FreeHost(dst)
	for i := range src.Bytes() {
		src.Bytes()[i] = byte(i%251 + 1)
	}
	s1, s2 := mustStream(t, dev), mustStream(t, dev)
	defer s1.Close()
	defer s2.Close()
	if err := s1.Memset(a, 0); err != nil {
		t.Fatal(err)
	}
	if err := s1.Synchronize(); err != nil {
		t.Fatal(err)
	}
	ev, e0, e1 := mustEvent(t, dev), mustEvent(t, dev), mustEvent(t, dev)
	for _, e := range []Event{ev, e0, e1} {
		defer e.Close()
	}

	ctl.setDelayUS(3000)
	must(t, s1.Record(e0))
	for range 8 { // keep s1 busy for 24 ms before its copy lands
		must(t, s1.Memset(c, 1))
	}
	must(t, s1.CopyHtoD(a, src.Bytes())) // pinned: asynchronous
	must(t, s1.Record(ev))
	must(t, s1.Record(e1))
	must(t, s2.CopyDtoD(b, a)) // no wait: runs while s1 is still busy
	must(t, s2.CopyDtoH(dst.Bytes()[:n], b))
	must(t, s2.Wait(ev))
	must(t, s2.CopyDtoH(dst.Bytes()[n:], a))
	must(t, s2.Synchronize())
	ctl.setDelayUS(0)

	if !bytes.Equal(dst.Bytes()[n:], src.Bytes()) {
		t.Fatal("the copy after Wait did not see the other stream's copy")
	}
	if bytes.ContainsFunc(dst.Bytes()[:n], func(r rune) bool { return r != 0 }) {
		t.Fatal("the copy before Wait saw the other stream's later copy: the fake driver did not run streams asynchronously")
	}
	must(t, e1.Synchronize())
	d, err := e1.Elapsed(e0)
	if err != nil {
		t.Fatal(err)
	}
	if d.Milliseconds() < 27 { // 9 operations of 3 ms between the records
		t.Fatalf("Elapsed = %v, want at least 27 ms", d)
	}
	if _, err := e1.Elapsed(mustEvent(t, CPU())); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("Elapsed against a CPU event: %v", err)
	}
}

func TestFakeCUDAReconstructMatchesReference(t *testing.T) {
	dev, ctl := openFake(t, CUDAOptions{})
	for i, c := range reconCases() {
		t.Run(c.String(), func(t *testing.T) { checkReconstruct(t, dev, c, uint64(i)) })
	}
	if ctl.stat("launch:kvs_reconstruct") == 0 {
		t.Fatal("no reconstruction ran in the fake driver")
	}
}

func TestFakeCUDAShiftMatchesReference(t *testing.T) {
	dev, ctl := openFake(t, CUDAOptions{})
	for i, c := range shiftCases() {
		t.Run(c.String(), func(t *testing.T) { checkShift(t, dev, c, uint64(i)) })
	}
	if ctl.stat("launch:kvs_shift") == 0 {
		t.Fatal("no shift ran in the fake driver")
	}
}

func TestFakeCUDAConvertSpecialValues(t *testing.T) {
	dev, _ := openFake(t, CUDAOptions{})
	checkConvert(t, dev)
}

// TestFakeCUDAPipelineMatchesReference: the prefetcher (pinned pool, arena,
// copy stream, events) and the reconstructor on the CUDA device.
func TestFakeCUDAPipelineMatchesReference(t *testing.T) {
	dev, ctl := openFake(t, CUDAOptions{})
	for i, c := range pipelineCases() {
		t.Run(fmt.Sprintf("%v/%v->%v", c.kind, c.factorDT, c.outDT), func(t *testing.T) {
			sc := buildScene(t, c, uint64(i))
			got, st := runPipeline(t, dev, c, sc)
			for kv, name := range []string{"K", "V"} {
				if !bytes.Equal(got[kv], sc.want[kv]) {
					t.Fatalf("%s: %s", name, firstDiff(&sc.kLay, got[kv], sc.want[kv]))
				}
			}
			if st.Loads == 0 {
				t.Fatalf("the prefetcher loaded nothing: %+v", st)
			}
		})
	}
	ctl.expect(t, map[string]int64{"live:host": 0}) // the pinned pool gave its buffers back
}

// TestFakeCUDADeviceReport runs the device check's report code on the
// binding at the small size; its figures are the fake's, not a GPU's.
func TestFakeCUDADeviceReport(t *testing.T) {
	dev, _ := openFake(t, CUDAOptions{})
	deviceReport(t, dev, smallReport)
}

// TestFakeCUDAKernelFault: a kernel that touches memory outside every
// allocation fails at the next Synchronize, as a GPU fault does, and the
// error stays with the context: Close reports it and still releases it.
func TestFakeCUDAKernelFault(t *testing.T) {
	lib, ctl := fakeDriver(t)
	dev, err := OpenCUDA(CUDAOptions{Library: lib})
	if err != nil {
		t.Fatal(err)
	}
	s := mustStream(t, dev)
	lay := Layout{Kind: LayoutHND, DType: format.DTypeBF16, Heads: 1, HeadDim: 8, Tokens: 4}
	wild, err := WrapDevice(dev, 1<<12, lay.Bytes()) // no allocation there
	if err != nil {
		t.Fatal(err)
	}
	src := mustAlloc(t, dev, lay.Bytes())
	must(t, s.Shift(&ShiftLaunch{Layout: lay, Dst: wild, Src: src, SrcDType: format.DTypeBF16, Tokens: 4}))
	var ce *CUDAError
	if err := s.Synchronize(); !errors.As(err, &ce) || ce.Name != "CUDA_ERROR_ILLEGAL_ADDRESS" || ce.Text != "an illegal memory access was encountered" {
		t.Fatalf("Synchronize after a faulting kernel: %v", err)
	}
	ctl.expect(t, map[string]int64{"fault:address": 1, "launch:kvs_shift": 0})
	if err := dev.Close(); !errors.As(err, &ce) || ce.Call != "cuCtxSynchronize" {
		t.Fatalf("Close after a fault: %v, want the cuCtxSynchronize error", err)
	}
	ctl.expect(t, map[string]int64{"unload:ok": 2, "release:ok": 1, "primary:refs": 0, "live:stream": 0})
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func mustAlloc(t *testing.T, dev Device, n int) Buffer {
	t.Helper()
	b, err := dev.Alloc(n)
	must(t, err)
	return b
}

func mustStream(t *testing.T, dev Device) Stream {
	t.Helper()
	s, err := dev.NewStream()
	must(t, err)
	return s
}

func mustEvent(t *testing.T, dev Device) Event {
	t.Helper()
	e, err := dev.NewEvent()
	must(t, err)
	return e
}
