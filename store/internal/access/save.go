package access

import (
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store/internal/catalog"
)

// Flush adds to b the changed statistics of packets still catalogued in
// cat, and forgets the packets that are not; the caller commits b
// (unsynced: the statistics are hints). Before Load the table holds this
// DB's uses only: they are added to the saved ones and counting
// starts afresh.
func (t *Table) Flush(cat *catalog.Catalog, b *pebble.Batch) error {
	t.LastFlush = time.Now()
	var stale []Key
	var err error
	t.Each(func(k Key, e *Entry) {
		if err != nil || !e.Dirty.Swap(false) {
			return
		}
		ok, herr := cat.Has(catalog.HeaderKey(k.NS, k.ID))
		switch {
		case herr != nil:
			err = herr
		case !ok:
			stale = append(stale, k)
		case t.loaded.Load():
			_ = b.Set(catalog.AccessKey(k.NS, k.ID), format.EncodeAccess(e.Last.Load(), e.Uses.Load()), nil)
		default:
			last, uses := saved(cat, k)
			_ = b.Set(catalog.AccessKey(k.NS, k.ID), format.EncodeAccess(max(last, e.Last.Load()), uses+e.Uses.Swap(0)), nil)
		}
	})
	for _, k := range stale {
		t.Remove(k)
	}
	return err
}

// saved reads packet k's saved statistics (zero if none or bad).
func saved(cat *catalog.Catalog, k Key) (last int64, uses uint64) {
	_, _ = cat.Get(catalog.AccessKey(k.NS, k.ID), func(v []byte) error {
		last, uses, _ = format.DecodeAccess(v)
		return nil
	})
	return last, uses
}

// Load makes the table hold every packet of rd with its size, pin and
// saved statistics (writer lock held). It runs once, on first need; later
// calls do nothing.
func (t *Table) Load(rd pebble.Reader) error {
	if t.loaded.Load() {
		return nil
	}
	err := catalog.Iterate(rd, []byte{catalog.TagHeader}, func(_, v []byte) error {
		h, err := format.DecodeHeader(v)
		if err != nil {
			return fmt.Errorf("store: capacity: %w", err)
		}
		e := t.Entry(Key{h.Namespace, h.ID}, true)
		e.Size, e.Model = h.ExtentLength, h.Model
		if e.Last.Load() == 0 {
			e.Last.Store(h.CreatedUnixNs)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if err := t.loadSaved(rd, catalog.TagPin, func(e *Entry, _ []byte) error { e.Pinned = true; return nil }); err != nil {
		return err
	}
	err = t.loadSaved(rd, catalog.TagAccess, func(e *Entry, v []byte) error {
		last, uses, err := format.DecodeAccess(v)
		if err != nil {
			return nil // only a hint: start afresh
		}
		if last > e.Last.Load() {
			e.Last.Store(last)
		}
		e.Uses.Add(uses)
		return nil
	})
	if err != nil {
		return err
	}
	t.loaded.Store(true)
	return nil
}

// loadSaved calls fn for every key of tag ('x' or 'p') whose packet has
// an entry.
func (t *Table) loadSaved(rd pebble.Reader, tag byte, fn func(*Entry, []byte) error) error {
	return catalog.Iterate(rd, []byte{tag}, func(k, v []byte) error {
		ns, rest, ok := catalog.SplitLenPrefixed(k[1:])
		if !ok || len(rest) != len(format.PacketID{}) {
			return nil
		}
		if e := t.Entry(Key{ns, format.PacketID(rest)}, false); e != nil && e.Size > 0 {
			return fn(e, v)
		}
		return nil
	})
}

// Due reports whether the statistics should be saved now, interval after
// the last save (a negative interval: never; the first interval starts
// with the first call).
func (t *Table) Due(interval time.Duration) bool {
	if interval < 0 || time.Since(t.LastFlush) < interval {
		return false
	}
	if t.LastFlush.IsZero() {
		t.LastFlush = time.Now() // the first interval starts with the first write
		return false
	}
	return true
}

// Save writes the changed statistics of packets still catalogued in cat
// in one unsynced batch (Flush).
func (t *Table) Save(cat *catalog.Catalog) error {
	b := cat.DB.NewBatch()
	defer b.Close()
	if err := t.Flush(cat, b); err != nil || b.Empty() {
		return err
	}
	if err := b.Commit(pebble.NoSync); err != nil {
		return fmt.Errorf("store: save access statistics: %w", err)
	}
	return nil
}
