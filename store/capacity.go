package store

import (
	"errors"
	"fmt"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store/internal/access"
	"github.com/kvstore/kvstore/store/internal/catalog"
)

// Capacity: with Options.MaxBytes set, a Put that would take the live
// extent bytes of the store (packets and span memories) past it first
// evicts packets, in Options.Eviction order, skipping pinned ones and the
// packet being put, all in one synced batch; if even evicting every
// candidate could not make room, the Put fails with ErrNoSpace and
// nothing is evicted. Span memories count towards the cap but are never
// evicted. Pins are durable:
//
//	'p' | ns len u16 BE | ns | packet id (32) -> empty
//
// written and deleted with pebble.Sync, and deleted with the packet.

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
	if err := checkNamespace(ns); err != nil {
		return false, err
	}
	h, err := db.header(ns, id)
	switch {
	case errors.Is(err, ErrNotFound):
		return false, nil
	case err != nil:
		return false, err
	case h.Model != model:
		return false, fmt.Errorf("%w: packet %s in namespace %q: stored for model %s, not %s",
			ErrModelMismatch, id.Short(), ns, h.Model.Short(), model.Short())
	}
	return db.cat.Has(catalog.PinKey(ns, id))
}

func (db *DB) setPin(ns string, model format.Fingerprint, id format.PacketID, pin bool) error {
	return db.write("pin", nil, func() error { return db.setPinLocked(ns, model, id, pin) })
}

// setPinLocked is setPin; the writer lock is held.
func (db *DB) setPinLocked(ns string, model format.Fingerprint, id format.PacketID, pin bool) error {
	h, err := db.header(ns, id)
	if err != nil {
		return err
	}
	if h.Model != model {
		return fmt.Errorf("%w: pin packet %s in namespace %q: stored for model %s, not %s",
			ErrModelMismatch, id.Short(), ns, h.Model.Short(), model.Short())
	}
	b := db.cat.DB.NewBatch()
	defer b.Close()
	if pin {
		_ = b.Set(catalog.PinKey(ns, id), nil, nil)
	} else {
		_ = b.Delete(catalog.PinKey(ns, id), nil)
	}
	if err := db.commit(b); err != nil {
		return fmt.Errorf("pin packet %s: %w", id.Short(), err)
	}
	if e := db.ops.access.Entry(access.Key{NS: ns, ID: id}, false); e != nil {
		e.Pinned = pin
	}
	return nil
}

// pinnedCount is the number of pinned packets (a scan of the pins).
func (db *DB) pinnedCount() int {
	if db.enter() != nil {
		return 0
	}
	defer db.leave()
	n := 0
	_ = catalog.Iterate(db.cat.DB, []byte{catalog.TagPin}, func(_, _ []byte) error { n++; return nil })
	return n
}

// closeAccess saves the statistics at Close (the gate is closed).
func (db *DB) closeAccess() error { return db.flushAccess() }

// makeRoom evicts packets so that an extent of need bytes (as it will be
// stored: encoded, pruned) fits under MaxBytes (writer lock held).
func (db *DB) makeRoom(need uint64) error {
	max := uint64(db.opts.MaxBytes)
	if max == 0 {
		return nil
	}
	var live uint64
	for _, r := range db.BlobFiles() {
		live += r.LiveBytes
	}
	if live+need <= max {
		return nil
	}
	if err := db.ops.access.Load(db.cat.DB); err != nil {
		return err
	}
	vs := db.ops.access.Candidates(db.opts.Eviction == EvictLFU)
	n, freed, ok := access.Plan(vs, live, need, max)
	if !ok {
		return fmt.Errorf("%w: %d live bytes + %d needed exceed %d, and only %d bytes are evictable",
			ErrNoSpace, live, need, max, freed)
	}
	return db.evict(vs[:n])
}

// evict deletes vs in one synced batch.
func (db *DB) evict(vs []access.Victim) error {
	b := db.cat.DB.NewBatch()
	defer b.Close()
	recs := map[uint32]BlobFileInfo{}
	var hs []*format.PacketHeader
	for _, v := range vs {
		h, err := db.header(v.Key.NS, v.Key.ID)
		if err != nil {
			return fmt.Errorf("evict packet %s: %w", v.Key.ID.Short(), err)
		}
		r, ok := recs[h.BlobFile]
		if !ok {
			if r, ok = db.record(h.BlobFile); !ok {
				return fmt.Errorf("%w: evict packet %s: blob file %06d is not catalogued", ErrCorruption, h.ID.Short(), h.BlobFile)
			}
		}
		killExtent(&r, h.ExtentLength)
		recs[r.Num] = r
		_ = b.Delete(catalog.HeaderKey(h.Namespace, h.ID), nil)
		_ = b.Delete(catalog.IndexKey(h.Namespace, h.Model, h.ID), nil)
		deleteOpsKeys(b, h.Namespace, h.ID)
		hs = append(hs, h)
	}
	for _, r := range recs {
		_ = b.Set(catalog.BlobFileKey(r.Num), encodeBlobRecord(&r), nil)
	}
	if err := db.commit(b); err != nil {
		return fmt.Errorf("evict: %w", err)
	}
	for _, r := range recs {
		db.setRecords(r)
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
