package packet

import (
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store/internal/bloblog"
	"github.com/kvstore/kvstore/store/internal/catalog"
)

// Records reads blob file num's catalogued record from the store's
// registry.
type Records func(num uint32) (catalog.BlobFile, bool)

// Appended is an extent of N bytes just written and synced at the end of
// the active blob file A, for the batch that catalogues it: Sealed are the
// files sealed since the last batch, Seq the record sequence the extent's
// record took, Record the registry.
type Appended struct {
	A      *bloblog.Active
	N      uint64
	Sealed []uint32
	Seq    uint64
	Record Records
}

// AddPut adds to b packet h's header and index entry and the records of
// the put of its extent: the active file's record with the extent live,
// records of the files sealed since the last batch, the next record
// sequence and, for a new file, the next file number. The caller adds the
// model spec if it is new and commits b; it returns the records written,
// for the caller to install once b is committed.
func AddPut(b *pebble.Batch, h *format.PacketHeader, x Appended) ([]catalog.BlobFile, error) {
	hv, err := format.EncodeHeader(h)
	if err != nil {
		return nil, fmt.Errorf("store: encode header: %w", err)
	}
	_ = b.Set(catalog.HeaderKey(h.Namespace, h.ID), hv, nil)
	_ = b.Set(catalog.IndexKey(h.Namespace, h.Model, h.ID), nil, nil)
	r, _ := x.Record(x.A.Num)
	r.Size = x.A.End + x.N
	r.LiveBytes += x.N
	r.Extents++
	r.LiveExtents++
	recs := []catalog.BlobFile{r}
	for _, num := range x.Sealed {
		if s, ok := x.Record(num); ok {
			s.Sealed = true
			recs = append(recs, s)
		}
	}
	x.finish(b, recs)
	return recs, nil
}

// AddDeletes adds to b the removal of packets hs' headers and index
// entries and the records of their deletion by as many tombstone extents,
// N bytes together, written in one append (one for a Delete, one per
// packet for an eviction): each extent dead in its file's record, the
// active file's record with the tombstones' bytes dead, records of files
// sealed since the last batch, the next record sequence (x.Seq is the last
// tombstone's) and, for a new file, the next file number. The caller adds
// the removal of the packets' access and pin records and commits b; it
// returns the records written, for the caller to install once b is
// committed.
func AddDeletes(b *pebble.Batch, hs []*format.PacketHeader, x Appended) []catalog.BlobFile {
	recs := map[uint32]catalog.BlobFile{}
	get := func(num uint32) catalog.BlobFile {
		if r, ok := recs[num]; ok {
			return r
		}
		r, _ := x.Record(num)
		return r
	}
	for _, num := range x.Sealed {
		if s, ok := x.Record(num); ok {
			s.Sealed = true
			recs[num] = s
		}
	}
	for _, h := range hs {
		r := get(h.BlobFile)
		r.KillExtent(h.ExtentLength)
		recs[r.Num] = r
		_ = b.Delete(catalog.HeaderKey(h.Namespace, h.ID), nil)
		_ = b.Delete(catalog.IndexKey(h.Namespace, h.Model, h.ID), nil)
	}
	t := get(x.A.Num)
	t.Size = x.A.End + x.N
	t.DeadBytes += x.N
	t.Extents += uint32(len(hs))
	recs[x.A.Num] = t
	out := make([]catalog.BlobFile, 0, len(recs))
	for _, rec := range recs {
		out = append(out, rec)
	}
	x.finish(b, out)
	return out
}

// finish adds recs, the next file number for a new file and the next
// record sequence to b.
func (x *Appended) finish(b *pebble.Batch, recs []catalog.BlobFile) {
	for i := range recs {
		_ = b.Set(catalog.BlobFileKey(recs[i].Num), catalog.EncodeBlobFile(&recs[i]), nil)
	}
	if x.A.Fresh {
		_ = b.Set(catalog.KeyNextBlob, catalog.EncodeSequence(x.A.Num+1), nil)
	}
	_ = b.Set(catalog.KeyRecordSeq, format.EncodeRecordSeq(x.Seq+1), nil)
}

// WriteTombstones writes each of ts's records as its own extent, one
// after the other from the end of the active blob file a, in one write,
// and returns their length together. It neither syncs the file nor
// catalogues the deletions: the caller does both, and abandons the bytes
// on an error.
func WriteTombstones(a *bloblog.Active, ts []*format.Tombstone) (uint64, error) {
	var buf []byte
	for _, t := range ts {
		rec, err := format.EncodeTombstone(t)
		if err != nil {
			return 0, err
		}
		e, err := bloblog.RecordExtent(a.End+uint64(len(buf)), rec, t.ID)
		if err != nil {
			return 0, err
		}
		buf = append(buf, e...)
	}
	return uint64(len(buf)), bloblog.WriteAt(a.F, a.Path, buf, a.End)
}
