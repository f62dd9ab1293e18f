package store

import (
	"errors"
	"fmt"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store/internal/access"
)

// Capacity: with Options.MaxBytes set, a Put that would take the live
// extent bytes of the store (packets and span memories) past it first
// evicts packets, in Options.Eviction order, skipping pinned ones and the
// packet being put: a tombstone each, written in one append and
// fdatasynced (so that store.Recover keeps them evicted), then one batch,
// as Delete does; if even evicting every
// candidate could not make room, the Put fails with ErrNoSpace and
// nothing is evicted. Span memories count towards the cap but are never
// evicted. Pins are durable (store/internal/access draws their record),
// and deleted with the packet.

// EvictionPolicy picks which packets Options.MaxBytes evicts.
type EvictionPolicy int

const (
	// EvictLRU evicts the least recently used packet first.
	EvictLRU EvictionPolicy = iota
	// EvictLFU evicts the least frequently used packet first (ties: least
	// recently used).
	EvictLFU
)

// Pin keeps packet id of namespace ns, stored for model, from eviction
// until Unpin (or Delete). It is durable when it returns. ErrNotFound if
// the packet is absent, ErrModelMismatch if stored for another model.
func (db *DB) Pin(ns string, model format.Fingerprint, id format.PacketID) error {
	return db.setPin(ns, model, id, true)
}

// Unpin lets packet id be evicted again. Unpinning a packet that is not
// pinned is not an error.
func (db *DB) Unpin(ns string, model format.Fingerprint, id format.PacketID) error {
	return db.setPin(ns, model, id, false)
}

// Pinned reports whether packet id of namespace ns, stored for model, is
// pinned: false for a packet not stored, ErrModelMismatch for one stored
// for another model (the same triple as Pin and Unpin).
func (db *DB) Pinned(ns string, model format.Fingerprint, id format.PacketID) (bool, error) {
	if err := db.enter(); err != nil {
		return false, err
	}
	defer db.leave()
	if err := format.CheckNamespace(ns); err != nil {
		return false, err
	}
	if _, err := db.storedFor("", ns, model, id); errors.Is(err, ErrNotFound) {
		return false, nil
	} else if err != nil {
		return false, err
	}
	return access.Pinned(db.cat, ns, id)
}

func (db *DB) setPin(ns string, model format.Fingerprint, id format.PacketID, pin bool) error {
	return db.write("pin", nil, func() error { return db.setPinLocked(ns, model, id, pin) })
}

// setPinLocked is setPin; the writer lock is held.
func (db *DB) setPinLocked(ns string, model format.Fingerprint, id format.PacketID, pin bool) error {
	if _, err := db.storedFor("pin ", ns, model, id); err != nil {
		return err
	}
	b := db.cat.DB.NewBatch()
	defer b.Close()
	access.SetPin(b, ns, id, pin)
	if err := db.commit(b); err != nil {
		return fmt.Errorf("pin packet %s: %w", id.Short(), err)
	}
	db.ops.access.Pin(access.Key{NS: ns, ID: id}, pin)
	return nil
}

// pinnedCount is the number of pinned packets (a scan of the pins).
func (db *DB) pinnedCount() int {
	if db.enter() != nil {
		return 0
	}
	defer db.leave()
	return access.CountPins(db.cat.DB)
}

// makeRoom evicts packets so that an extent of need bytes (as it will be
// stored: encoded, pruned) fits under MaxBytes (writer lock held).
func (db *DB) makeRoom(need uint64) error {
	max := uint64(db.opts.MaxBytes)
	if max == 0 {
		return nil
	}
	var live uint64
	for _, r := range db.blobRecords() {
		live += r.LiveBytes
	}
	vs, err := db.ops.access.Room(db.cat.DB, live, need, max, db.opts.Eviction == EvictLFU)
	if err != nil || len(vs) == 0 {
		return err
	}
	return db.evict(vs)
}

// evict deletes vs as Delete does, with a tombstone each written in one
// append, and one batch (access.Evictor), committed as Delete's.
func (db *DB) evict(vs []access.Victim) error {
	e := access.Evictor{Header: db.header, Record: db.record, Seq: db.w.Seq, Tombstones: db.appendTombstones}
	hs, err := e.Evict(vs)
	if err != nil {
		return err
	}
	var bytes uint64
	for _, h := range hs {
		bytes += h.ExtentLength
		db.afterDelete(h, EventEvicted)
	}
	db.st.evictions.Add(uint64(len(hs)))
	db.st.evictedBytes.Add(bytes)
	db.log.Info("store: evicted packets for MaxBytes", "dir", db.dir, "packets", len(hs), "bytes", bytes)
	return nil
}
