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
	Catalog *catalog.Catalog
	// Header reads and checks packet id's header in namespace ns.
	Header func(ns string, id format.PacketID) (*format.PacketHeader, error)
	// Record is blob file num's catalogued record.
	Record func(num uint32) (catalog.BlobFile, bool)
	// Commit commits a batch durably.
	Commit func(b *pebble.Batch) error
}

// Evict deletes vs in one synced batch: each packet's header, index entry,
// access and pin records, and its extent in its blob file's record (now
// dead bytes). It returns the headers of the packets removed and the
// records changed, for the store to install once it committed.
func (e *Evictor) Evict(vs []Victim) ([]*format.PacketHeader, []catalog.BlobFile, error) {
	b := e.Catalog.DB.NewBatch()
	defer b.Close()
	recs := map[uint32]catalog.BlobFile{}
	var hs []*format.PacketHeader
	for _, v := range vs {
		h, err := e.Header(v.Key.NS, v.Key.ID)
		if err != nil {
			return nil, nil, fmt.Errorf("evict packet %s: %w", v.Key.ID.Short(), err)
		}
		r, ok := recs[h.BlobFile]
		if !ok {
			if r, ok = e.Record(h.BlobFile); !ok {
				return nil, nil, fmt.Errorf("%w: evict packet %s: blob file %06d is not catalogued", format.ErrCorruption, h.ID.Short(), h.BlobFile)
			}
		}
		r.KillExtent(h.ExtentLength)
		recs[r.Num] = r
		_ = b.Delete(catalog.HeaderKey(h.Namespace, h.ID), nil)
		_ = b.Delete(catalog.IndexKey(h.Namespace, h.Model, h.ID), nil)
		DeleteKeys(b, h.Namespace, h.ID)
		hs = append(hs, h)
	}
	out := make([]catalog.BlobFile, 0, len(recs))
	for _, r := range recs {
		_ = b.Set(catalog.BlobFileKey(r.Num), catalog.EncodeBlobFile(&r), nil)
		out = append(out, r)
	}
	if err := e.Commit(b); err != nil {
		return nil, nil, fmt.Errorf("evict: %w", err)
	}
	return hs, out, nil
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
