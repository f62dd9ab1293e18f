package events

import (
	"sync/atomic"
	"testing"
)

// event is a test event: its name and the missed count it was made with.
type event struct {
	name   string
	missed uint64
}

// publish publishes the event named name.
func publish(h *Hub[event], name string, dropped *atomic.Uint64) {
	h.Publish(func(n uint64) event { return event{name, n} }, dropped)
}

// TestHub: every subscriber gets each event in order; a full channel drops
// without blocking, counted in the next event it gets and in the total;
// the cancel function closes the channel once and ends delivery.
func TestHub(t *testing.T) {
	var h Hub[event]
	var dropped atomic.Uint64
	a, cancelA := h.Subscribe(1)
	b, cancelB := h.Subscribe(4)
	publish(&h, "stored", &dropped)
	publish(&h, "removed", &dropped) // a is full: dropped for a
	if ev := <-a; ev != (event{"stored", 0}) {
		t.Fatalf("a's first event %+v", ev)
	}
	publish(&h, "evicted", &dropped)
	if ev := <-a; ev != (event{"evicted", 1}) {
		t.Fatalf("a's event after a drop %+v, want missed 1", ev)
	}
	for _, want := range []string{"stored", "removed", "evicted"} {
		if ev := <-b; ev != (event{want, 0}) {
			t.Fatalf("b got %+v, want %s", ev, want)
		}
	}
	if dropped.Load() != 1 {
		t.Fatalf("%d dropped in all, want 1", dropped.Load())
	}
	cancelA()
	cancelA()
	if _, ok := <-a; ok {
		t.Fatal("a still open after cancel")
	}
	publish(&h, "compacted", &dropped)
	if ev := <-b; ev.name != "compacted" {
		t.Fatalf("b got %+v after a left", ev)
	}
	cancelB()
}
