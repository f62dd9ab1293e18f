package store

import "github.com/kvstore/kvstore/format"

// EventKind says what happened to a packet.
type EventKind int

const (
	// EventPacketStored: a Put committed a new packet.
	EventPacketStored EventKind = iota + 1
	// EventPacketRemoved: a Delete removed a packet.
	EventPacketRemoved
	// EventEvicted: capacity eviction (Options.MaxBytes) removed a packet.
	EventEvicted
	// EventCompacted: compaction moved a packet's bytes (it is unchanged).
	EventCompacted
)

// String is the kind's name: "stored", "removed", "evicted", "compacted",
// or "unknown".
func (k EventKind) String() string {
	switch k {
	case EventPacketStored:
		return "stored"
	case EventPacketRemoved:
		return "removed"
	case EventEvicted:
		return "evicted"
	case EventCompacted:
		return "compacted"
	}
	return "unknown"
}

// Event is one change of the store's packets, as a router subscribed with
// Subscribe sees it, after the change is durable.
type Event struct {
	// Kind says what happened.
	Kind EventKind
	// Namespace, Model and ID name the packet.
	Namespace string
	Model     format.Fingerprint
	ID        format.PacketID
	// Dropped is how many events this subscriber has missed so far, its
	// channel being full: a router that sees it grow should resynchronise
	// (List) rather than trust its incremental view.
	Dropped uint64
}

// Subscribe returns a channel of the store's events, buffered to hold buf
// (at least 1), and a function that ends the subscription and closes the
// channel (call it once done; it is idempotent). Publishing never blocks
// the store: when the channel is full the event is dropped for this
// subscriber and counted in the Dropped field of the next event it gets.
// Events are published after the change commits, in commit order per
// writer; Close does not close subscriptions.
func (db *DB) Subscribe(buf int) (<-chan Event, func()) { return db.ops.events.Subscribe(buf) }

// publish sends ev to every subscriber without blocking.
func (db *DB) publish(ev Event) {
	db.ops.events.Publish(func(missed uint64) Event { ev.Dropped = missed; return ev }, &db.st.eventsDropped)
}

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
