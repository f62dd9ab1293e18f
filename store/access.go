package store

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store/internal/catalog"
)

// Access statistics are eviction's ordering hints: per packet, when it
// was last used and how often. A Get costs no write: it updates atomic
// counters in a sharded in-memory table. The table is saved lazily, in
// unsynced batches, at Close and every Options.AccessFlushInterval (from
// the write path), under
//
//	'x' | ns len u16 BE | ns | packet id (32) -> framed "KVAC": last use unix ns i64 LE | uses u64 LE
//
// Losing them in a crash loses only ordering hints, never data. Pins, on
// the other hand, are durable (capacity.go).

const accessShards = 16

// accessTable holds the access statistics (and, once loaded, every
// packet's size and pin state for eviction).
type accessTable struct {
	shards [accessShards]accessShard
	// loaded: every catalogued packet has an entry with its size (done
	// on first need by capacity's loadTable, under the writer lock).
	loaded    atomic.Bool
	lastFlush time.Time // writer lock
}

type accessShard struct {
	mu sync.RWMutex
	m  map[packetKey]*accessEntry
}

// packetKey names a packet within the store.
type packetKey struct {
	ns string
	id format.PacketID
}

type accessEntry struct {
	last  atomic.Int64  // unix ns of the last use
	uses  atomic.Uint64 // uses since it was stored
	dirty atomic.Bool   // changed since the last flush
	// Under the writer lock:
	size   uint64 // extent bytes; 0 until loaded
	model  format.Fingerprint
	pinned bool
}

func (t *accessTable) shard(k packetKey) *accessShard {
	h := uint32(k.id[0]) | uint32(k.id[1])<<8
	return &t.shards[h%accessShards]
}

// entry returns k's entry, creating it if create.
func (t *accessTable) entry(k packetKey, create bool) *accessEntry {
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
		s.m = map[packetKey]*accessEntry{}
	}
	if e = s.m[k]; e == nil {
		e = &accessEntry{}
		s.m[k] = e
	}
	return e
}

func (t *accessTable) remove(k packetKey) {
	s := t.shard(k)
	s.mu.Lock()
	delete(s.m, k)
	s.mu.Unlock()
}

// each calls fn with every entry (shard by shard, each read-locked).
func (t *accessTable) each(fn func(packetKey, *accessEntry)) {
	for i := range t.shards {
		s := &t.shards[i]
		s.mu.RLock()
		for k, e := range s.m {
			fn(k, e)
		}
		s.mu.RUnlock()
	}
}

// touch records a use of packet (ns, id): Get calls it on every hit.
func (db *DB) touch(ns string, id format.PacketID) {
	e := db.ops.access.entry(packetKey{ns, id}, true)
	e.last.Store(time.Now().UnixNano())
	e.uses.Add(1)
	e.dirty.Store(true)
}

// touchNew records a packet just stored (writer lock held).
func (db *DB) touchNew(h *format.PacketHeader) {
	e := db.ops.access.entry(packetKey{h.Namespace, h.ID}, true)
	e.size, e.model = h.ExtentLength, h.Model
	e.last.Store(time.Now().UnixNano())
	e.dirty.Store(true)
	db.maybeFlushAccess()
}

// forget drops a removed packet's statistics (writer lock held).
func (db *DB) forget(ns string, id format.PacketID) {
	db.ops.access.remove(packetKey{ns, id})
}

// deleteOpsKeys adds to b the removal of a packet's access and pin
// records, for the batch that deletes it.
func deleteOpsKeys(b *pebble.Batch, ns string, id format.PacketID) {
	_ = b.Delete(catalog.AccessKey(ns, id), nil)
	_ = b.Delete(catalog.PinKey(ns, id), nil)
}

// maybeFlushAccess saves the statistics if the flush interval has passed
// (writer lock held).
func (db *DB) maybeFlushAccess() {
	t := &db.ops.access
	iv := db.opts.AccessFlushInterval
	if iv < 0 || time.Since(t.lastFlush) < iv {
		return
	}
	if t.lastFlush.IsZero() {
		t.lastFlush = time.Now() // the first interval starts with the first write
		return
	}
	if err := db.flushAccess(); err != nil {
		db.log.Warn("store: saving access statistics", "dir", db.dir, "err", err)
	}
}

// flushAccess writes the changed statistics of packets still catalogued
// in one unsynced batch. The caller holds the writer lock, or the DB is
// closing.
func (db *DB) flushAccess() error {
	t := &db.ops.access
	t.lastFlush = time.Now()
	if db.opts.ReadOnly || db.failed != nil {
		return nil
	}
	b := db.cat.DB.NewBatch()
	defer b.Close()
	var stale []packetKey
	var err error
	t.each(func(k packetKey, e *accessEntry) {
		if err != nil || !e.dirty.Swap(false) {
			return
		}
		ok, herr := db.cat.Has(catalog.HeaderKey(k.ns, k.id))
		switch {
		case herr != nil:
			err = herr
		case !ok:
			stale = append(stale, k)
		case t.loaded.Load():
			_ = b.Set(catalog.AccessKey(k.ns, k.id), encodeAccess(e.last.Load(), e.uses.Load()), nil)
		default:
			// The table holds this session's uses only: add the saved ones
			// and start counting afresh.
			last, uses := db.savedAccess(k)
			_ = b.Set(catalog.AccessKey(k.ns, k.id), encodeAccess(max(last, e.last.Load()), uses+e.uses.Swap(0)), nil)
		}
	})
	for _, k := range stale {
		t.remove(k)
	}
	if err != nil || b.Empty() {
		return err
	}
	if err := b.Commit(pebble.NoSync); err != nil {
		return fmt.Errorf("store: save access statistics: %w", err)
	}
	return nil
}

func encodeAccess(last int64, uses uint64) []byte { return format.EncodeAccess(last, uses) }

func decodeAccess(v []byte) (last int64, uses uint64, err error) { return format.DecodeAccess(v) }

// savedAccess reads packet k's saved statistics (zero if none or bad).
func (db *DB) savedAccess(k packetKey) (last int64, uses uint64) {
	_, _ = db.cat.Get(catalog.AccessKey(k.ns, k.id), func(v []byte) error {
		last, uses, _ = decodeAccess(v)
		return nil
	})
	return last, uses
}
