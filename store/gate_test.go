package store

import (
	"sync"
	"testing"
	"time"
)

func TestGate(t *testing.T) {
	g := newGate()
	if !g.enter() || !g.enter() { // nested calls
		t.Fatal("an open gate refused a call")
	}
	closed := make(chan bool)
	go func() { closed <- g.close() }()
	select {
	case <-closed:
		t.Fatal("close returned with calls in flight")
	case <-time.After(20 * time.Millisecond):
	}
	g.leave()
	g.leave()
	if ok := <-closed; !ok {
		t.Fatal("first close reported the gate already closed")
	}
	if g.enter() {
		t.Fatal("a closed gate admitted a call")
	}
	if g.close() {
		t.Fatal("second close reported success")
	}
}

func TestGateConcurrent(t *testing.T) {
	g := newGate()
	var wg sync.WaitGroup
	var inside, admittedAfterClose sync.Map
	var closedAt time.Time
	var mu sync.Mutex
	for i := range 8 {
		wg.Go(func() {
			for j := 0; ; j++ {
				if !g.enter() {
					return
				}
				inside.Store(i, j)
				mu.Lock()
				if !closedAt.IsZero() {
					admittedAfterClose.Store(i, true)
				}
				mu.Unlock()
				g.leave()
			}
		})
	}
	time.Sleep(5 * time.Millisecond)
	g.close()
	mu.Lock()
	closedAt = time.Now()
	mu.Unlock()
	wg.Wait()
	admittedAfterClose.Range(func(k, _ any) bool {
		t.Errorf("goroutine %v was inside after close returned", k)
		return true
	})
}
