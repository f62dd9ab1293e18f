package gate

import (
	"sync"
	"testing"
	"time"
)

func TestGate(t *testing.T) {
	g := New()
	if !g.Enter() || !g.Enter() { // nested calls
		t.Fatal("an open gate refused a call")
	}
	closed := make(chan bool)
	go func() { closed <- g.Close() }()
	select {
	case <-closed:
		t.Fatal("close returned with calls in flight")
	case <-time.After(20 * time.Millisecond):
	}
	g.Leave()
	g.Leave()
	if ok := <-closed; !ok {
		t.Fatal("first close reported the gate already closed")
	}
	if g.Enter() {
		t.Fatal("a closed gate admitted a call")
	}
	if g.Close() {
		t.Fatal("second close reported success")
	}
}

func TestGateConcurrent(t *testing.T) {
	g := New()
	var wg sync.WaitGroup
	var inside, admittedAfterClose sync.Map
	var closedAt time.Time
	var mu sync.Mutex
	for i := range 8 {
		wg.Go(func() {
			for j := 0; ; j++ {
				if !g.Enter() {
					return
				}
				inside.Store(i, j)
				mu.Lock()
				if !closedAt.IsZero() {
					admittedAfterClose.Store(i, true)
				}
				mu.Unlock()
				g.Leave()
			}
		})
	}
	time.Sleep(5 * time.Millisecond)
	g.Close()
	mu.Lock()
	closedAt = time.Now()
	mu.Unlock()
	wg.Wait()
	admittedAfterClose.Range(func(k, _ any) bool {
		t.Errorf("goroutine %v was inside after close returned", k)
		return true
	})
}
