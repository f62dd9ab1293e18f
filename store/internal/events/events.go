// Package events is the store's packet event stream: Hub fans each event
// out to every subscriber's buffered channel without ever blocking the
// publisher, counting what a full channel drops. It is generic over the
// event type, so that the events subscribers receive are the store's own
// Event (store/events.go).
package events

import (
	"sync"
	"sync/atomic"
)

// Hub is a set of subscribers to events of type E. The zero value is empty
// and ready.
type Hub[E any] struct {
	mu   sync.RWMutex
	subs map[*subscriber[E]]struct{}
}

type subscriber[E any] struct {
	ch      chan E
	dropped atomic.Uint64
}

// Subscribe returns a channel of events buffered to hold buf (at least 1),
// and a function that ends the subscription and closes the channel
// (idempotent).
func (h *Hub[E]) Subscribe(buf int) (<-chan E, func()) {
	s := &subscriber[E]{ch: make(chan E, max(buf, 1))}
	h.mu.Lock()
	if h.subs == nil {
		h.subs = map[*subscriber[E]]struct{}{}
	}
	h.subs[s] = struct{}{}
	h.mu.Unlock()
	var once sync.Once
	return s.ch, func() {
		once.Do(func() {
			h.mu.Lock()
			delete(h.subs, s)
			h.mu.Unlock()
			close(s.ch)
		})
	}
}

// Publish sends every subscriber the event ev makes for it, given how many
// events that subscriber has missed so far, without blocking: a
// subscriber whose channel is full misses it, counted in the number its
// next event is made with and in dropped.
func (h *Hub[E]) Publish(ev func(missed uint64) E, dropped *atomic.Uint64) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	for s := range h.subs {
		select {
		case s.ch <- ev(s.dropped.Load()):
		default:
			s.dropped.Add(1)
			dropped.Add(1)
		}
	}
}
