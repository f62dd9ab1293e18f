package gpu

import (
	"fmt"
	"sync"
	"time"
)

// cpuOp is one queued piece of stream work. Control ops (event records and
// waits, synchronisation markers) always run; work ops are skipped after an
// earlier one failed, as CUDA skips work on a stream with a sticky error,
// until Synchronize reports the error.
type cpuOp struct {
	fn      func() error
	control bool
}

// cpuStream runs its queue on one goroutine, in enqueue order.
type cpuStream struct {
	dev *cpuDevice

	mu     sync.Mutex
	cond   sync.Cond
	queue  []cpuOp
	closed bool
	done   chan struct{}

	err error // first work error since the last Synchronize; worker only
}

func newCPUStream(d *cpuDevice) *cpuStream {
	s := &cpuStream{dev: d, done: make(chan struct{})}
	s.cond.L = &s.mu
	go s.run()
	return s
}

func (s *cpuStream) run() {
	defer close(s.done)
	for {
		s.mu.Lock()
		for len(s.queue) == 0 && !s.closed {
			s.cond.Wait()
		}
		if len(s.queue) == 0 {
			s.mu.Unlock()
			return
		}
		op := s.queue[0]
		s.queue[0] = cpuOp{}
		s.queue = s.queue[1:]
		s.mu.Unlock()
		if op.control || s.err == nil {
			if err := op.fn(); err != nil && s.err == nil {
				s.err = err
			}
		}
	}
}

func (s *cpuStream) enqueue(op cpuOp) error {
	if err := s.dev.check("stream"); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return fmt.Errorf("%w: cpu stream", ErrClosed)
	}
	s.queue = append(s.queue, op)
	s.cond.Signal()
	return nil
}

func (s *cpuStream) work(fn func() error) error { return s.enqueue(cpuOp{fn: fn}) }

// sameLen checks a copy's lengths and the buffers' owner.
func (s *cpuStream) copyArgs(what string, dstLen, srcLen int, bufs ...Buffer) error {
	if dstLen != srcLen {
		return fmt.Errorf("%w: %s: dst %d bytes, src %d bytes", ErrInvalidArgument, what, dstLen, srcLen)
	}
	for _, b := range bufs {
		if err := b.ownedBy(s.dev, what); err != nil {
			return err
		}
	}
	return nil
}

func (s *cpuStream) CopyHtoD(dst Buffer, src []byte) error {
	if err := s.copyArgs("copy h2d", dst.Len(), len(src), dst); err != nil {
		return err
	}
	return s.work(func() error { copy(dst.bytes(), src); return nil })
}

func (s *cpuStream) CopyDtoH(dst []byte, src Buffer) error {
	if err := s.copyArgs("copy d2h", len(dst), src.Len(), src); err != nil {
		return err
	}
	return s.work(func() error { copy(dst, src.bytes()); return nil })
}

func (s *cpuStream) CopyDtoD(dst, src Buffer) error {
	if err := s.copyArgs("copy d2d", dst.Len(), src.Len(), dst, src); err != nil {
		return err
	}
	return s.work(func() error { copy(dst.bytes(), src.bytes()); return nil })
}

func (s *cpuStream) Memset(dst Buffer, v byte) error {
	if err := dst.ownedBy(s.dev, "memset"); err != nil {
		return err
	}
	return s.work(func() error {
		b := dst.bytes()
		for i := range b {
			b[i] = v
		}
		return nil
	})
}

func (s *cpuStream) Record(e Event) error {
	ev, err := s.event(e, "record")
	if err != nil {
		return err
	}
	done := ev.arm()
	return s.enqueue(cpuOp{control: true, fn: func() error { done(); return nil }})
}

func (s *cpuStream) Wait(e Event) error {
	ev, err := s.event(e, "wait")
	if err != nil {
		return err
	}
	ch := ev.current()
	return s.enqueue(cpuOp{control: true, fn: func() error { <-ch; return nil }})
}

func (s *cpuStream) event(e Event, what string) (*cpuEvent, error) {
	ev, ok := e.(*cpuEvent)
	if !ok || ev.dev != s.dev {
		return nil, fmt.Errorf("%w: %s: event of another device", ErrInvalidArgument, what)
	}
	return ev, nil
}

func (s *cpuStream) Reconstruct(k *ReconstructLaunch) error {
	l := *k
	if err := l.check(s.dev); err != nil {
		return err
	}
	if k := s.dev.kernels; k != nil {
		return s.work(func() error { return k.reconstruct(&l) })
	}
	return s.work(func() error { return cpuReconstruct(&l) })
}

func (s *cpuStream) Shift(k *ShiftLaunch) error {
	l := *k
	if err := l.check(s.dev); err != nil {
		return err
	}
	if k := s.dev.kernels; k != nil {
		return s.work(func() error { return k.shift(&l) })
	}
	return s.work(func() error { return cpuShift(&l) })
}

func (s *cpuStream) Synchronize() error {
	reply := make(chan error, 1)
	err := s.enqueue(cpuOp{control: true, fn: func() error {
		reply <- s.err
		s.err = nil
		return nil
	}})
	if err != nil {
		return err
	}
	return <-reply
}

func (s *cpuStream) Close() error {
	err := s.Synchronize()
	s.mu.Lock()
	s.closed = true
	s.cond.Signal()
	s.mu.Unlock()
	<-s.done
	return err
}

// cpuEvent completes when a stream reaches its most recent Record. Each
// Record arms a new channel, so that a Wait enqueued earlier keeps waiting
// for the record it saw, as in CUDA.
type cpuEvent struct {
	dev *cpuDevice

	mu sync.Mutex
	ch chan struct{} // closed when the latest record completes
	at time.Time     // when it completed
}

var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

func newCPUEvent(d *cpuDevice) *cpuEvent { return &cpuEvent{dev: d, ch: closedChan} }

// arm starts a new record and returns the function that completes it.
func (e *cpuEvent) arm() func() {
	ch := make(chan struct{})
	e.mu.Lock()
	e.ch = ch
	e.mu.Unlock()
	return func() {
		e.mu.Lock()
		if e.ch == ch {
			e.at = time.Now()
		}
		e.mu.Unlock()
		close(ch)
	}
}

func (e *cpuEvent) current() chan struct{} {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.ch
}

func (e *cpuEvent) Synchronize() error {
	<-e.current()
	return nil
}

func (e *cpuEvent) Elapsed(start Event) (time.Duration, error) {
	s, ok := start.(*cpuEvent)
	if !ok || s.dev != e.dev {
		return 0, fmt.Errorf("%w: elapsed: event of another device", ErrInvalidArgument)
	}
	t0, ok0 := s.completed()
	t1, ok1 := e.completed()
	if !ok0 || !ok1 {
		return 0, fmt.Errorf("%w: elapsed: event not recorded and completed", ErrInvalidArgument)
	}
	return t1.Sub(t0), nil
}

// completed returns the time of the latest record if it has completed.
func (e *cpuEvent) completed() (time.Time, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	select {
	case <-e.ch:
		return e.at, !e.at.IsZero()
	default:
		return time.Time{}, false
	}
}

func (e *cpuEvent) Close() error { return nil }
