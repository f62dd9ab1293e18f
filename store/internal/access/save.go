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
	ch, err := t.changes(cat)
	for _, c := range ch {
		c.add(b)
	}
	return err
}

// change is one packet's statistics to save: its record, and what the
// table gave up for it (its dirty mark and, before Load, its uses), given
// back if the record is not committed.
type change struct {
	k    Key
	e    *Entry
	v    []byte
	uses uint64
}

func (c *change) add(b *pebble.Batch) { _ = b.Set(catalog.AccessKey(c.k.NS, c.k.ID), c.v, nil) }

// undo gives the change back to the table, for a later save.
func (c *change) undo() {
	c.e.Uses.Add(c.uses)
	c.e.Dirty.Store(true)
}

// changes takes the changed statistics of packets still catalogued in cat
// from the table, and forgets the packets that are not.
func (t *Table) changes(cat *catalog.Catalog) ([]change, error) {
	t.LastFlush = time.Now()
	var stale []Key
	var ch []change
	var err error
	t.Each(func(k Key, e *Entry) {
		if err != nil || !e.Dirty.Swap(false) {
			return
		}
		ok, herr := cat.Has(catalog.HeaderKey(k.NS, k.ID))
		switch {
		case herr != nil:
			e.Dirty.Store(true)
			err = herr
		case !ok:
			stale = append(stale, k)
		case t.loaded.Load():
			ch = append(ch, change{k: k, e: e, v: format.EncodeAccess(e.Last.Load(), e.Uses.Load())})
		default:
			last, uses := saved(cat, k)
			n := e.Uses.Swap(0)
			ch = append(ch, change{k: k, e: e, v: format.EncodeAccess(max(last, e.Last.Load()), uses+n), uses: n})
		}
	})
	for _, k := range stale {
		t.Remove(k)
	}
	return ch, err
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
// in unsynced batches of about limit bytes each (at least one record),
// small enough never to be one of Pebble's large batches. Before each
// commit it calls ready, if not nil, with the batch's size: an error from
// it stops the save, and the statistics not written stay in the table for
// a later one (the store skips a save the catalog cannot take without
// stalling, access statistics being hints).
func (t *Table) Save(cat *catalog.Catalog, limit int, ready func(n int) error) error {
	ch, err := t.changes(cat)
	b := cat.DB.NewBatch()
	defer b.Close()
	from := 0 // ch[from:i] are in b
	commit := func(i int) error {
		if b.Empty() {
			return nil
		}
		if ready != nil {
			if err := ready(b.Len()); err != nil {
				return err
			}
		}
		if err := cat.CommitUnsynced(b); err != nil {
			return fmt.Errorf("store: save access statistics: %w", err)
		}
		b.Reset()
		from = i
		return nil
	}
	for i := range ch {
		if b.Len() >= limit {
			if err := commit(i); err != nil {
				undo(ch[from:])
				return err
			}
		}
		ch[i].add(b)
	}
	if cerr := commit(len(ch)); cerr != nil {
		undo(ch[from:])
		return cerr
	}
	return err
}

func undo(ch []change) {
	for i := range ch {
		ch[i].undo()
	}
}
