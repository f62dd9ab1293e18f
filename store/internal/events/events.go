// Package events is the store's packet event stream: Hub fans each Event
// out to every subscriber's buffered channel without ever blocking the
// publisher, counting what a full channel drops. The store's Event and
// EventKind are this package's.
package events

import (
	"sync"
	"sync/atomic"

	"github.com/kvstore/kvstore/format"
)

// Kind says what happened to a packet.
type Kind int

const (
	// PacketStored: a Put committed a new packet.
	PacketStored Kind = iota + 1
	// PacketRemoved: a Delete removed a packet.
	PacketRemoved
	// Evicted: capacity eviction (Options.MaxBytes) removed a packet.
	Evicted
	// Compacted: compaction moved a packet's bytes (it is unchanged).
	Compacted
)

func (k Kind) String() string {
	switch k {
	case PacketStored:
		return "stored"
	case PacketRemoved:
		return "removed"
	case Evicted:
		return "evicted"
	case Compacted:
		return "compacted"
	}
	return "unknown"
}

// Event is one change of the store's packets, as a router subscribed with
// Subscribe sees it, after the change is durable.
type Event struct {
	Kind      Kind
	Namespace string
	Model     format.Fingerprint
	ID        format.PacketID
	// Dropped is how many events this subscriber has missed so far, its
	// channel being full: a router that sees it grow should resynchronise
	// (List) rather than trust its incremental view.
	Dropped uint64
}

// Hub is a set of subscribers. The zero value is empty and ready.
type Hub struct {
	mu   sync.RWMutex
	subs map[*subscriber]struct{}
}

type subscriber struct {
	ch      chan Event
	dropped atomic.Uint64
}

// Subscribe returns a channel of events buffered to hold buf (at least 1),
// and a function that ends the subscription and closes the channel
// (idempotent).
func (h *Hub) Subscribe(buf int) (<-chan Event, func()) {
	s := &subscriber{ch: make(chan Event, max(buf, 1))}
	h.mu.Lock()
	if h.subs == nil {
		h.subs = map[*subscriber]struct{}{}
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

// Publish sends ev to every subscriber without blocking: a subscriber
// whose channel is full misses it, counted in its next event's Dropped and
// in dropped.
func (h *Hub) Publish(ev Event, dropped *atomic.Uint64) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	for s := range h.subs {
		ev.Dropped = s.dropped.Load()
		select {
		case s.ch <- ev:
		default:
			s.dropped.Add(1)
			dropped.Add(1)
		}
	}
}
