package gpu

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/kvstore/kvstore/format"
)

func TestStreamOrder(t *testing.T) {
	dev := CPU()
	s, err := dev.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	buf, _ := dev.Alloc(8)
	// Each copy overwrites the last: only stream order makes the final
	// value the last one enqueued.
	for i := range 100 {
		if err := s.CopyHtoD(buf, []byte{byte(i), 1, 2, 3, 4, 5, 6, 7}); err != nil {
			t.Fatal(err)
		}
	}
	got := make([]byte, 8)
	if err := s.CopyDtoH(got, buf); err != nil {
		t.Fatal(err)
	}
	if err := s.Synchronize(); err != nil {
		t.Fatal(err)
	}
	if got[0] != 99 {
		t.Fatalf("after 100 ordered copies the buffer starts with %d, want 99", got[0])
	}
}

// TestEventOrdersStreams: work on stream b after Wait(e) sees what stream a
// wrote before Record(e), even though a is blocked behind a slow host op.
func TestEventOrdersStreams(t *testing.T) {
	dev := CPU()
	a, _ := dev.NewStream()
	b, _ := dev.NewStream()
	defer a.Close()
	defer b.Close()
	ev, _ := dev.NewEvent()
	buf, _ := dev.Alloc(4)
	gate := make(chan struct{})
	// Block stream a until the test lets it go.
	if err := a.(*cpuStream).work(func() error { <-gate; return nil }); err != nil {
		t.Fatal(err)
	}
	if err := a.CopyHtoD(buf, []byte{7, 7, 7, 7}); err != nil {
		t.Fatal(err)
	}
	if err := a.Record(ev); err != nil {
		t.Fatal(err)
	}
	if err := b.Wait(ev); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 4)
	if err := b.CopyDtoH(got, buf); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- b.Synchronize() }()
	select {
	case <-done:
		t.Fatal("stream b finished while the event it waits for was not reached")
	case <-time.After(20 * time.Millisecond):
	}
	close(gate)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got[0] != 7 {
		t.Fatalf("stream b read %v before stream a's write", got)
	}
	if err := ev.Synchronize(); err != nil {
		t.Fatal(err)
	}
}

// TestWaitCapturesRecord: a Wait sees the Record made before it, not a
// later one, as in CUDA.
func TestWaitCapturesRecord(t *testing.T) {
	dev := CPU()
	a, _ := dev.NewStream()
	b, _ := dev.NewStream()
	defer a.Close()
	defer b.Close()
	ev, _ := dev.NewEvent()
	if err := a.Record(ev); err != nil {
		t.Fatal(err)
	}
	if err := a.Synchronize(); err != nil {
		t.Fatal(err)
	}
	if err := b.Wait(ev); err != nil { // the completed record
		t.Fatal(err)
	}
	gate := make(chan struct{})
	defer close(gate)
	if err := a.(*cpuStream).work(func() error { <-gate; return nil }); err != nil {
		t.Fatal(err)
	}
	if err := a.Record(ev); err != nil { // a record that will not complete yet
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- b.Synchronize() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Wait blocked on a Record made after it")
	}
}

func TestStreamErrorIsSticky(t *testing.T) {
	dev := CPU()
	s, _ := dev.NewStream()
	defer s.Close()
	buf, _ := dev.Alloc(4)
	boom := errors.New("boom")
	ran := false
	s.(*cpuStream).work(func() error { return boom })
	s.(*cpuStream).work(func() error { ran = true; return nil })
	if err := s.Synchronize(); !errors.Is(err, boom) {
		t.Fatalf("Synchronize = %v, want the failed op's error", err)
	}
	if ran {
		t.Fatal("work after a failure ran")
	}
	if err := s.CopyHtoD(buf, []byte{1, 2, 3, 4}); err != nil {
		t.Fatal(err)
	}
	if err := s.Synchronize(); err != nil {
		t.Fatalf("the error was reported twice: %v", err)
	}
}

func TestStreamArgumentErrors(t *testing.T) {
	dev, other := CPU(), CPU()
	s, _ := dev.NewStream()
	defer s.Close()
	buf, _ := dev.Alloc(16)
	foreign, _ := other.Alloc(16)
	otherEv, _ := other.NewEvent()
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"short h2d", s.CopyHtoD(buf, make([]byte, 15))},
		{"short d2h", s.CopyDtoH(make([]byte, 17), buf)},
		{"foreign d2d", s.CopyDtoD(buf, foreign)},
		{"foreign event", s.Wait(otherEv)},
		{"foreign record", s.Record(otherEv)},
		{"bad launch", s.Reconstruct(&ReconstructLaunch{})},
		{"bad shift", s.Shift(&ShiftLaunch{Layout: Layout{Kind: LayoutHND, DType: format.DTypeF32, Heads: 1, HeadDim: 2}})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !errors.Is(tc.err, ErrInvalidArgument) {
				t.Errorf("%s: error %v, want ErrInvalidArgument", tc.name, tc.err)
			}
		})
	}
	if _, err := buf.Sub(10, 7); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("Sub out of range: %v", err)
	}
}

func TestClosed(t *testing.T) {
	dev := CPU()
	s, _ := dev.NewStream()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	buf, _ := dev.Alloc(4)
	if err := s.Memset(buf, 1); !errors.Is(err, ErrClosed) {
		t.Fatalf("Memset on a closed stream: %v", err)
	}
	dev.Close()
	if _, err := dev.Alloc(4); !errors.Is(err, ErrClosed) {
		t.Fatalf("Alloc on a closed device: %v", err)
	}
}

func TestElapsedAndMemset(t *testing.T) {
	dev := CPU()
	s, _ := dev.NewStream()
	defer s.Close()
	e0, _ := dev.NewEvent()
	e1, _ := dev.NewEvent()
	if _, err := e1.Elapsed(e0); err == nil {
		t.Fatal("Elapsed of unrecorded events succeeded")
	}
	buf, _ := dev.Alloc(1 << 16)
	s.Record(e0)
	s.(*cpuStream).work(func() error { time.Sleep(2 * time.Millisecond); return nil })
	s.Memset(buf, 0x5c)
	s.Record(e1)
	if err := e1.Synchronize(); err != nil {
		t.Fatal(err)
	}
	d, err := e1.Elapsed(e0)
	if err != nil || d < 2*time.Millisecond {
		t.Fatalf("Elapsed = %v, %v; want >= 2ms", d, err)
	}
	got := download(t, s, buf)
	for i, v := range got {
		if v != 0x5c {
			t.Fatalf("byte %d = %#x after Memset", i, v)
		}
	}
}

// TestConcurrentStreams hammers several streams and events from several
// goroutines; the race detector checks the queue and event locking.
func TestConcurrentStreams(t *testing.T) {
	dev := CPU()
	buf, _ := dev.Alloc(1024)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			s, _ := dev.NewStream()
			defer s.Close()
			ev, _ := dev.NewEvent()
			part, _ := buf.Sub(256*g, 256)
			src := filled(256, byte(g))
			for range 50 {
				s.CopyHtoD(part, src)
				s.Record(ev)
				ev.Synchronize()
			}
			got := download(t, s, part)
			if got[0] != byte(g) || got[255] != byte(g) {
				t.Errorf("stream %d read back %d", g, got[0])
			}
		})
	}
	wg.Wait()
}
