package gpu

import (
	"fmt"
	"runtime"
	"time"
	"unsafe"

	"github.com/kvstore/kvstore/gpu/internal/cuda"
)

// cudaStream is a CUstream created non-blocking (no implicit ordering
// with the legacy default stream).
type cudaStream struct {
	d *cudaDevice
	s uintptr
}

func (s *cudaStream) owned(what string, bufs ...Buffer) error {
	for _, b := range bufs {
		if err := b.ownedBy(s.d, what); err != nil {
			return err
		}
	}
	return nil
}

// hostCopy runs an asynchronous copy to or from host memory h; unless h is
// AllocHost memory it waits for the stream, so that no DMA outlives the
// call on memory the Go runtime manages.
func (s *cudaStream) hostCopy(call string, h []byte, f func(p unsafe.Pointer) cuda.Result) error {
	if len(h) == 0 {
		return nil
	}
	var pin runtime.Pinner
	p := unsafe.Pointer(unsafe.SliceData(h))
	pin.Pin(p)
	defer pin.Unpin()
	pinned := s.d.pinned.contains(h)
	return s.d.do(call, func() cuda.Result {
		if r := f(p); r != cuda.Success || pinned {
			return r
		}
		return s.d.drv.StreamSync(s.s)
	})
}

func (s *cudaStream) CopyHtoD(dst Buffer, src []byte) error {
	if err := s.owned("copy h2d", dst); err != nil {
		return err
	}
	if dst.Len() != len(src) {
		return fmt.Errorf("%w: copy h2d: dst %d bytes, src %d bytes", ErrInvalidArgument, dst.Len(), len(src))
	}
	return s.hostCopy("cuMemcpyHtoDAsync_v2", src, func(p unsafe.Pointer) cuda.Result {
		return s.d.drv.MemcpyHtoDAsync(dst.Ptr(), p, uint64(len(src)), s.s)
	})
}

func (s *cudaStream) CopyDtoH(dst []byte, src Buffer) error {
	if err := s.owned("copy d2h", src); err != nil {
		return err
	}
	if src.Len() != len(dst) {
		return fmt.Errorf("%w: copy d2h: dst %d bytes, src %d bytes", ErrInvalidArgument, len(dst), src.Len())
	}
	return s.hostCopy("cuMemcpyDtoHAsync_v2", dst, func(p unsafe.Pointer) cuda.Result {
		return s.d.drv.MemcpyDtoHAsync(p, src.Ptr(), uint64(len(dst)), s.s)
	})
}

func (s *cudaStream) CopyDtoD(dst, src Buffer) error {
	if err := s.owned("copy d2d", dst, src); err != nil {
		return err
	}
	if dst.Len() != src.Len() {
		return fmt.Errorf("%w: copy d2d: dst %d bytes, src %d bytes", ErrInvalidArgument, dst.Len(), src.Len())
	}
	if dst.Len() == 0 {
		return nil
	}
	return s.d.do("cuMemcpyDtoDAsync_v2", func() cuda.Result {
		return s.d.drv.MemcpyDtoDAsync(dst.Ptr(), src.Ptr(), uint64(dst.Len()), s.s)
	})
}

func (s *cudaStream) Memset(dst Buffer, v byte) error {
	if err := s.owned("memset", dst); err != nil {
		return err
	}
	if dst.Len() == 0 {
		return nil
	}
	return s.d.do("cuMemsetD8Async", func() cuda.Result {
		return s.d.drv.MemsetD8Async(dst.Ptr(), v, uint64(dst.Len()), s.s)
	})
}

func (s *cudaStream) event(e Event, what string) (*cudaEvent, error) {
	ev, ok := e.(*cudaEvent)
	if !ok || ev.d != s.d {
		return nil, fmt.Errorf("%w: %s: event of another device", ErrInvalidArgument, what)
	}
	return ev, nil
}

func (s *cudaStream) Record(e Event) error {
	ev, err := s.event(e, "record")
	if err != nil {
		return err
	}
	return s.d.do("cuEventRecord", func() cuda.Result { return s.d.drv.EventRecord(ev.e, s.s) })
}

func (s *cudaStream) Wait(e Event) error {
	ev, err := s.event(e, "wait")
	if err != nil {
		return err
	}
	return s.d.do("cuStreamWaitEvent", func() cuda.Result { return s.d.drv.StreamWaitEvent(s.s, ev.e, 0) })
}

func (s *cudaStream) Reconstruct(k *ReconstructLaunch) error {
	if err := k.check(s.d); err != nil {
		return err
	}
	if k.NumJobs == 0 {
		return nil
	}
	p := reconParams(k)
	grid, shared := reconGrid(k, &p)
	return s.launch("cuLaunchKernel(kvs_reconstruct)", s.d.fnRecon, grid, reconThreads, shared, unsafe.Pointer(&p))
}

func (s *cudaStream) Shift(k *ShiftLaunch) error {
	if err := k.check(s.d); err != nil {
		return err
	}
	n := int64(k.Layout.Heads) * int64(k.Tokens) * int64(k.Layout.HeadDim)
	if n == 0 {
		return nil
	}
	p := shiftParams(k)
	grid := shiftGrid(n, s.d.info.Multiprocessors)
	return s.launch("cuLaunchKernel(kvs_shift)", s.d.fnShift, grid, shiftThreads, 0, unsafe.Pointer(&p))
}

// launch starts fn with one by-value struct parameter at params.
func (s *cudaStream) launch(call string, fn uintptr, grid [3]uint32, threads, shared uint32, params unsafe.Pointer) error {
	var pin runtime.Pinner
	pin.Pin(params)
	defer pin.Unpin()
	args := []unsafe.Pointer{params}
	return s.d.do(call, func() cuda.Result {
		return s.d.drv.LaunchKernel(fn, grid[0], grid[1], grid[2], threads, 1, 1, shared, s.s, &args[0], nil)
	})
}

func (s *cudaStream) Synchronize() error {
	return s.d.do("cuStreamSynchronize", func() cuda.Result { return s.d.drv.StreamSync(s.s) })
}

func (s *cudaStream) Close() error {
	err := s.Synchronize()
	if err2 := s.d.do("cuStreamDestroy_v2", func() cuda.Result { return s.d.drv.StreamDestroy(s.s) }); err == nil {
		err = err2
	}
	return err
}

// cudaEvent is a CUevent with timing enabled, created with blocking sync
// so that a goroutine waiting on it sleeps instead of spinning a core.
type cudaEvent struct {
	d *cudaDevice
	e uintptr
}

func (e *cudaEvent) Synchronize() error {
	return e.d.do("cuEventSynchronize", func() cuda.Result { return e.d.drv.EventSynchronize(e.e) })
}

func (e *cudaEvent) Elapsed(start Event) (time.Duration, error) {
	s, ok := start.(*cudaEvent)
	if !ok || s.d != e.d {
		return 0, fmt.Errorf("%w: elapsed: event of another device", ErrInvalidArgument)
	}
	var ms float32
	if err := e.d.do("cuEventElapsedTime", func() cuda.Result { return e.d.drv.EventElapsedTime(&ms, s.e, e.e) }); err != nil {
		return 0, err
	}
	return time.Duration(float64(ms) * float64(time.Millisecond)), nil
}

func (e *cudaEvent) Close() error {
	return e.d.do("cuEventDestroy_v2", func() cuda.Result { return e.d.drv.EventDestroy(e.e) })
}
