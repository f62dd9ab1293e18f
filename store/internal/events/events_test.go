package events

import (
	"sync/atomic"
	"testing"
)

// TestHub: every subscriber gets each event in order; a full channel drops
// without blocking, counted in the next event it gets and in the total;
// the cancel function closes the channel once and ends delivery.
func TestHub(t *testing.T) {
	var h Hub
	var dropped atomic.Uint64
	a, cancelA := h.Subscribe(1)
	b, cancelB := h.Subscribe(4)
	h.Publish(Event{Kind: PacketStored, Namespace: "x"}, &dropped)
	h.Publish(Event{Kind: PacketRemoved}, &dropped) // a is full: dropped for a
	if ev := <-a; ev.Kind != PacketStored || ev.Namespace != "x" || ev.Dropped != 0 {
		t.Fatalf("a's first event %+v", ev)
	}
	h.Publish(Event{Kind: Evicted}, &dropped)
	if ev := <-a; ev.Kind != Evicted || ev.Dropped != 1 {
		t.Fatalf("a's event after a drop %+v, want Dropped 1", ev)
	}
	for _, want := range []Kind{PacketStored, PacketRemoved, Evicted} {
		if ev := <-b; ev.Kind != want || ev.Dropped != 0 {
			t.Fatalf("b got %+v, want %v", ev, want)
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
	h.Publish(Event{Kind: Compacted}, &dropped)
	if ev := <-b; ev.Kind != Compacted {
		t.Fatalf("b got %+v after a left", ev)
	}
	cancelB()
	if Compacted.String() != "compacted" || Kind(0).String() != "unknown" {
		t.Fatalf("names %q %q", Compacted, Kind(0))
	}
}
