package access

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/kvstore/kvstore/format"
)

const shards = 16

// Table holds the access statistics (and, once loaded, every packet's
// size and pin state for eviction). The zero value is empty and ready.
type Table struct {
	shards [shards]shard
	// loaded: every catalogued packet has an entry with its size (done
	// on first need by Load, under the store's writer lock).
	loaded atomic.Bool
	// LastFlush is when the table was last saved (writer lock).
	LastFlush time.Time
}

type shard struct {
	mu sync.RWMutex
	m  map[Key]*Entry
}

// Key names a packet within the store.
type Key struct {
	NS string
	ID format.PacketID
}

// Entry is one packet's statistics.
type Entry struct {
	Last  atomic.Int64  // unix ns of the last use
	Uses  atomic.Uint64 // uses since it was stored
	Dirty atomic.Bool   // changed since the last flush
	// Under the store's writer lock:
	Size   uint64 // extent bytes; 0 until loaded
	Model  format.Fingerprint
	Pinned bool
}

func (t *Table) shard(k Key) *shard {
	h := uint32(k.ID[0]) | uint32(k.ID[1])<<8
	return &t.shards[h%shards]
}

// Entry returns k's entry, creating it if create (nil if absent and not).
func (t *Table) Entry(k Key, create bool) *Entry {
	s := t.shard(k)
	s.mu.RLock()
	e := s.m[k]
	s.mu.RUnlock()
	if e != nil || !create {
		return e
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[Key]*Entry{}
	}
	if e = s.m[k]; e == nil {
		e = &Entry{}
		s.m[k] = e
	}
	return e
}

// Remove drops k's entry.
func (t *Table) Remove(k Key) {
	s := t.shard(k)
	s.mu.Lock()
	delete(s.m, k)
	s.mu.Unlock()
}

// Each calls fn with every entry (shard by shard, each read-locked).
func (t *Table) Each(fn func(Key, *Entry)) {
	for i := range t.shards {
		s := &t.shards[i]
		s.mu.RLock()
		for k, e := range s.m {
			fn(k, e)
		}
		s.mu.RUnlock()
	}
}

// Loaded reports whether Load has run.
func (t *Table) Loaded() bool { return t.loaded.Load() }

// Touch records a use of k now: Get calls it on every hit.
func (t *Table) Touch(k Key) {
	e := t.Entry(k, true)
	e.Last.Store(time.Now().UnixNano())
	e.Uses.Add(1)
	e.Dirty.Store(true)
}

// Stored records a packet just stored (writer lock held).
func (t *Table) Stored(h *format.PacketHeader) {
	e := t.Entry(Key{h.Namespace, h.ID}, true)
	e.Size, e.Model = h.ExtentLength, h.Model
	e.Last.Store(time.Now().UnixNano())
	e.Dirty.Store(true)
}
