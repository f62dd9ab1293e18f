package spandb

import (
	"errors"
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store/internal/bloblog"
	"github.com/kvstore/kvstore/store/internal/catalog"
	"github.com/kvstore/kvstore/store/internal/spanmem"
)

// Put is one span memory on its way into the store: laid out by NewPut
// (outside the writer lock), checked against the catalog by
// Prepare, written and committed by Write.
type Put struct {
	NS, Name string
	Memory   *spanmem.Memory
	ID       format.ContextID
	Extent   *spanmem.Extent
	old      *format.SpanMeta // the memory it replaces; nil for none
	storeW   bool             // the batch stores Memory's fitted W
}

// NewPut lays out the extent of m, checked (Memory.Check), as the memory
// id of context name in namespace ns (names the store checked).
func NewPut(ns, name string, m *spanmem.Memory, id format.ContextID) (*Put, error) {
	ext, err := spanmem.LayoutExtent(m)
	if err != nil {
		return nil, err
	}
	return &Put{NS: ns, Name: name, Memory: m, ID: id, Extent: ext}, nil
}

// Prepare reads the root record of the memory p replaces, if any, and
// decides whether p's fitted W goes in its batch. It refuses
// (format.ErrInvalidArgument) a fitted W whose name now holds another W:
// the memory's projected keys would not match it. The writer lock is held
// from Prepare to Write.
func (s *Store) Prepare(p *Put) error {
	old, err := s.Meta(p.NS, p.Name)
	if err != nil && !errors.Is(err, s.NotFound) {
		return err
	}
	p.old = old
	p.storeW, err = s.checkFitted(p.Memory)
	return err
}

// checkFitted reports whether m's fitted W must be stored, and refuses one
// whose name now holds another W.
func (s *Store) checkFitted(m *spanmem.Memory) (bool, error) {
	p := &m.Projection
	if p.Fitted == nil {
		return false, nil
	}
	a, ok, err := s.Host.Artifacts(&m.Model).Artifact(p.Name)
	switch {
	case err != nil:
		return false, err
	case ok && a.Hash != p.Hash:
		return false, fmt.Errorf("%w: artifact %q was stored with another W since the memory was built; rebuild it", format.ErrInvalidArgument, p.Name)
	}
	return !ok, nil // the same W may be there already
}

// Write writes p's extent at the end of a (the active blob file the
// store's bloblog.Writer prepared; sealed lists the files it sealed since
// the last batch), fdatasyncs it and commits p's records in one synced
// batch. It returns the blob file records the batch wrote and the change
// in the number of stored memories (1, or 0 for a replacement), for the
// store to install. On an error nothing is catalogued.
func (s *Store) Write(p *Put, a *bloblog.Active, sealed []uint32) (recs []catalog.BlobFile, added int64, err error) {
	off, ext := a.End, p.Extent
	if err := ext.Write(a.F, a.Path, off, p.ID); err != nil {
		return nil, 0, err
	}
	s.Wrote(ext.Length)
	if err := s.SyncData(a.F); err != nil {
		return nil, 0, fmt.Errorf("store: sync blob file %s: %w", a.Path, err)
	}
	meta := ext.Meta(p.Memory, p.ID, a.Num, off)
	b := s.Catalog.DB.NewBatch()
	defer b.Close()
	if err := s.batch(b, p, meta); err != nil {
		return nil, 0, err
	}
	recs = s.records(a, sealed, ext.Length, p.old)
	for i := range recs {
		_ = b.Set(catalog.BlobFileKey(recs[i].Num), catalog.EncodeBlobFile(&recs[i]), nil)
	}
	if a.Fresh {
		_ = b.Set(catalog.KeyNextBlob, catalog.EncodeSequence(a.Num+1), nil)
	}
	if err := s.Host.Commit(b); err != nil {
		return nil, 0, err
	}
	if p.old != nil {
		return recs, 0, nil // replaced
	}
	return recs, 1, nil
}

// batch adds the memory's records to b: the old memory's head records
// deleted, the new root and heads, the model spec and, if p.storeW, the
// fitted W.
func (s *Store) batch(b *pebble.Batch, p *Put, meta *format.SpanMeta) error {
	m := p.Memory
	if err := spanmem.SetRecords(b, p.NS, p.Name, m, meta, p.Extent, p.old); err != nil {
		return err
	}
	if err := s.Host.AddModel(b, meta.Model, &m.Model); err != nil {
		return err
	}
	if w := &m.Projection; p.storeW {
		rec, err := format.Seal(format.KindArtifact, format.EncodeArtifact(meta.Model, w.Name, w.Fitted, &w.FittedMeta, time.Now().UnixNano()))
		if err != nil {
			return fmt.Errorf("store: artifact %q: %w", w.Name, err)
		}
		_ = b.Set(catalog.ArtifactKey(meta.Model, w.Name), rec, nil)
		_ = b.Set(catalog.ArtifactIndexKey(meta.Model, w.Name), nil, nil)
	}
	return nil
}

// records returns the blob file records after the commit: the active
// file a grown by n live bytes, the old memory's extent (if any) dead, and
// the files sealed since the last batch.
func (s *Store) records(a *bloblog.Active, sealed []uint32, n uint64, old *format.SpanMeta) []catalog.BlobFile {
	r, _ := s.Host.Record(a.Num)
	r.Size = a.End + n
	r.LiveBytes += n
	r.Extents++
	r.LiveExtents++
	recs := []catalog.BlobFile{r}
	for _, num := range sealed {
		if sr, ok := s.Host.Record(num); ok && num != a.Num {
			sr.Sealed = true
			recs = append(recs, sr)
		}
	}
	if old == nil {
		return recs
	}
	for i := range recs {
		if recs[i].Num == old.BlobFile {
			recs[i].KillExtent(old.ExtentLength)
			return recs
		}
	}
	if o, ok := s.Host.Record(old.BlobFile); ok {
		o.KillExtent(old.ExtentLength)
		recs = append(recs, o)
	}
	return recs
}
