package access

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/cockroachdb/pebble/v2"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store/internal/catalog"
	"github.com/kvstore/kvstore/store/internal/space"
)

// Victim is an eviction candidate.
type Victim struct {
	Key  Key
	Size uint64
	Last int64
	Uses uint64
}

// Candidates lists the unpinned packets of a loaded table in eviction
// order: least recently used first, or with lfu least frequently used
// first (ties: least recently used); ties after that by packet id.
func (t *Table) Candidates(lfu bool) []Victim {
	var vs []Victim
	t.Each(func(k Key, e *Entry) {
		if e.Size > 0 && !e.Pinned {
			vs = append(vs, Victim{k, e.Size, e.Last.Load(), e.Uses.Load()})
		}
	})
	slices.SortFunc(vs, func(a, b Victim) int {
		if lfu && a.Uses != b.Uses {
			return cmp.Compare(a.Uses, b.Uses)
		}
		if a.Last != b.Last {
			return cmp.Compare(uint64(a.Last), uint64(b.Last))
		}
		return slices.Compare(a.Key.ID[:], b.Key.ID[:])
	})
	return vs
}

// Plan returns how many of vs (in order) must go so that need more bytes
// fit under limit with live bytes stored, and the bytes they free; ok is
// false when even all of them would not make room.
func Plan(vs []Victim, live, need, limit uint64) (n int, freed uint64, ok bool) {
	for ; n < len(vs) && live-freed+need > limit; n++ {
		freed += vs[n].Size
	}
	return n, freed, live-freed+need <= limit
}

// Room returns the packets to evict, in order, so that an extent of need
// more bytes fits under limit with live bytes stored: none when it fits.
// It loads the table from rd on first need. When even every candidate
// would not make room it fails with an error wrapping ErrNoSpace, and
// nothing is to be evicted.
func (t *Table) Room(rd pebble.Reader, live, need, limit uint64, lfu bool) ([]Victim, error) {
	if live+need <= limit {
		return nil, nil
	}
	if err := t.Load(rd); err != nil {
		return nil, err
	}
	vs := t.Candidates(lfu)
	n, freed, ok := Plan(vs, live, need, limit)
	if !ok {
		return nil, fmt.Errorf("%w: %d live bytes + %d needed exceed %d, and only %d bytes are evictable",
			space.ErrNoSpace, live, need, limit, freed)
	}
	return vs[:n], nil
}

// Evictor is what eviction needs of the store, the writer lock held.
type Evictor struct {
	// Header reads and checks packet id's header in namespace ns.
	Header func(ns string, id format.PacketID) (*format.PacketHeader, error)
	// Record is blob file num's catalogued record.
	Record func(num uint32) (catalog.BlobFile, bool)
	// Seq is the sequence the first tombstone takes (the next ones follow).
	Seq uint64
	// Tombstones appends ts as tombstone extents to the active blob file in
	// one write, fdatasyncs them, and commits in one batch the
	// deletion of hs (headers, index entries, extents dead in their files'
	// records, the tombstones' bytes dead in the active file's) with what
	// add puts in it; then it installs the records (the store's
	// appendTombstones).
	Tombstones func(ts []*format.Tombstone, hs []*format.PacketHeader, add func(b *pebble.Batch)) error
}

// Evict deletes vs as Delete does: one tombstone extent each, appended in
// one write and synced, then one batch removing each packet's
// header, index entry, access and pin records, with its extent dead in its
// blob file's record and the tombstones' bytes dead in the active file's.
// A rebuilt catalog (store.Recover) so keeps them evicted. It returns the
// headers of the packets removed; nothing is written when one of them is
// not found.
func (e *Evictor) Evict(vs []Victim) ([]*format.PacketHeader, error) {
	hs := make([]*format.PacketHeader, 0, len(vs))
	ts := make([]*format.Tombstone, 0, len(vs))
	for i, v := range vs {
		h, err := e.Header(v.Key.NS, v.Key.ID)
		if err != nil {
			return nil, fmt.Errorf("evict packet %s: %w", v.Key.ID.Short(), err)
		}
		if _, ok := e.Record(h.BlobFile); !ok {
			return nil, fmt.Errorf("%w: evict packet %s: blob file %06d is not catalogued", format.ErrCorruption, h.ID.Short(), h.BlobFile)
		}
		hs = append(hs, h)
		ts = append(ts, &format.Tombstone{Seq: e.Seq + uint64(i), Namespace: h.Namespace, ID: h.ID, Model: h.Model})
	}
	err := e.Tombstones(ts, hs, func(b *pebble.Batch) {
		for _, h := range hs {
			DeleteKeys(b, h.Namespace, h.ID)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("evict: %w", err)
	}
	return hs, nil
}

// DeleteKeys adds to b the removal of a packet's access and pin records,
// for the batch that deletes it.
func DeleteKeys(b *pebble.Batch, ns string, id format.PacketID) {
	_ = b.Delete(catalog.AccessKey(ns, id), nil)
	_ = b.Delete(catalog.PinKey(ns, id), nil)
}

// CountPins is the number of pinned packets in rd (a scan of the pins).
func CountPins(rd pebble.Reader) int {
	n := 0
	_ = catalog.Iterate(rd, []byte{catalog.TagPin}, func(_, _ []byte) error { n++; return nil })
	return n
}
