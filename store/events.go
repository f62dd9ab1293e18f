package store

import (
	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store/internal/events"
)

// EventKind says what happened to a packet.
type EventKind = events.Kind

const (
	// EventPacketStored: a Put committed a new packet.
	EventPacketStored = events.PacketStored
	// EventPacketRemoved: a Delete removed a packet.
	EventPacketRemoved = events.PacketRemoved
	// EventEvicted: capacity eviction (Options.MaxBytes) removed a packet.
	EventEvicted = events.Evicted
	// EventCompacted: compaction moved a packet's bytes (it is unchanged).
	EventCompacted = events.Compacted
)

// Event is one change of the store's packets, as a router subscribed with
// Subscribe sees it, after the change is durable. Dropped is how many
// events this subscriber has missed so far, its channel being full: a
// router that sees it grow should resynchronise (List) rather than trust
// its incremental view.
type Event = events.Event

// Subscribe returns a channel of the store's events, buffered to hold buf
// (at least 1), and a function that ends the subscription and closes the
// channel (call it once done; it is idempotent). Publishing never blocks
// the store: when the channel is full the event is dropped for this
// subscriber and counted in the Dropped field of the next event it gets.
// Events are published after the change commits, in commit order per
// writer; Close does not close subscriptions.
func (db *DB) Subscribe(buf int) (<-chan Event, func()) { return db.ops.events.Subscribe(buf) }

// publish sends ev to every subscriber without blocking.
func (db *DB) publish(ev Event) { db.ops.events.Publish(ev, &db.st.eventsDropped) }

// afterPut runs once a Put's batch committed: access statistics and the
// event.
func (db *DB) afterPut(h *format.PacketHeader) {
	db.touchNew(h)
	db.publish(Event{Kind: EventPacketStored, Namespace: h.Namespace, Model: h.Model, ID: h.ID})
}

// afterDelete runs once a packet's removal committed.
func (db *DB) afterDelete(h *format.PacketHeader, kind EventKind) {
	db.forget(h.Namespace, h.ID)
	db.publish(Event{Kind: kind, Namespace: h.Namespace, Model: h.Model, ID: h.ID})
}
