package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store/internal/bloblog"
	"github.com/kvstore/kvstore/store/internal/catalog"
	"github.com/kvstore/kvstore/store/internal/spanmem"
)

// SpanMemory is SeKV's memory of one long context (spanmem.Memory): the
// context cut into spans, the resident rows kept at full resolution, and
// per (layer, KV head) span summaries and factors.
type SpanMemory = spanmem.Memory

// SpanHead is one (layer, KV head) of a SpanMemory.
type SpanHead = spanmem.Head

// ProjectionRef names the routing projection W the summaries were
// projected with.
type ProjectionRef = spanmem.ProjectionRef

// isAbsent reports a lookup that found nothing for the model asked.
func isAbsent(err error) bool { return errors.Is(err, ErrNotFound) || errors.Is(err, ErrModelMismatch) }

// PutSpanMemory stores m as the span memory of context name in namespace
// ns, replacing any memory stored under that name (for any model), and
// returns its id, ComputeContextID(ns, fingerprint, name). It is one
// commit: resident rows and factors are appended to the blob log as one
// extent and fdatasynced, then one synced Pebble batch writes the root
// record, one record per (layer, KV head), the blob file accounting, the
// model spec if new and, when m carries a W it fitted, that artifact. When
// it returns nil the memory is durable; a crash before leaves no trace.
//
// A fitted W is refused (ErrInvalidArgument) if a different W was stored
// under its name since m was built: the memory's projected keys would not
// match it. Rebuild m then.
func (db *DB) PutSpanMemory(ctx context.Context, ns, name string, m *SpanMemory) (ContextID, error) {
	var (
		id  ContextID
		ext *spanmem.Extent
	)
	err := db.write("put span memory", func() (err error) {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("put span memory: %w", err)
		}
		if err := checkContextName(ns, name); err != nil {
			return err
		}
		if err := m.Check(); err != nil {
			return err
		}
		id = ComputeContextID(ns, m.Model.Fingerprint(), name)
		ext, err = spanmem.LayoutExtent(m)
		return err
	}, func() error {
		if err := db.putSpans(ns, name, m, id, ext); err != nil {
			return fmt.Errorf("put span memory %q: %w", name, err)
		}
		return nil
	})
	return id, err
}

// putSpans writes, syncs and catalogues a span extent (writer lock held).
func (db *DB) putSpans(ns, name string, m *SpanMemory, id ContextID, ext *spanmem.Extent) error {
	old, err := db.spanMeta(ns, name)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return err
	}
	storeW, err := db.checkFitted(m)
	if err != nil {
		return err
	}
	a, err := db.w.Prepare(ext.Length)
	if err != nil {
		return err
	}
	if a.Fresh {
		db.addFile(BlobFileInfo{Num: a.Num, Size: a.End})
	}
	if err := db.appendSpans(a, ns, name, m, id, ext, old, storeW); err != nil {
		if a.Fresh {
			db.dropFile(a.Num)
		}
		db.w.Abandon()
		return err
	}
	return nil
}

// appendSpans writes the extent at the end of a, syncs it and commits.
func (db *DB) appendSpans(a *bloblog.Active, ns, name string, m *SpanMemory, id ContextID, ext *spanmem.Extent, old *SpanMeta, storeW bool) error {
	off := a.End
	if err := ext.Write(a.F, a.Path, off, id); err != nil {
		return err
	}
	db.st.bytesWritten.Add(ext.Length)
	if err := timed(&db.st.blobSyncs, &db.st.blobSyncNanos, a.F.SyncData); err != nil {
		return fmt.Errorf("store: sync blob file %s: %w", a.Path, err)
	}
	meta := ext.Meta(m, id, a.Num, off)
	b := db.cat.DB.NewBatch()
	defer b.Close()
	if err := db.spanBatch(b, ns, name, m, meta, ext, old, storeW); err != nil {
		return err
	}
	recs := db.spanRecords(a, ext.Length, old)
	for i := range recs {
		_ = b.Set(catalog.BlobFileKey(recs[i].Num), encodeBlobRecord(&recs[i]), nil)
	}
	if a.Fresh {
		_ = b.Set(catalog.KeyNextBlob, encodeSequence(a.Num+1), nil)
	}
	if err := db.commit(b); err != nil {
		return err
	}
	db.w.Committed(ext.Length)
	added := int64(1)
	if old != nil {
		added = 0 // replaced
	}
	db.setSpanRecords(added, recs...)
	spec := m.Model
	db.models.LoadOrStore(meta.Model, &spec)
	return nil
}

// spanBatch adds the memory's records to b: the old memory's head records
// deleted, the new root and heads, the model spec and, if storeW, the
// fitted W.
func (db *DB) spanBatch(b *pebble.Batch, ns, name string, m *SpanMemory, meta *SpanMeta, ext *spanmem.Extent, old *SpanMeta, storeW bool) error {
	if err := spanmem.SetRecords(b, ns, name, m, meta, ext, old); err != nil {
		return err
	}
	if err := db.addModel(b, meta.Model, &m.Model); err != nil {
		return err
	}
	if p := &m.Projection; storeW {
		rec, err := format.Seal(format.KindArtifact, format.EncodeArtifact(meta.Model, p.Name, p.Fitted, &p.FittedMeta, time.Now().UnixNano()))
		if err != nil {
			return fmt.Errorf("store: artifact %q: %w", p.Name, err)
		}
		_ = b.Set(catalog.ArtifactKey(meta.Model, p.Name), rec, nil)
		_ = b.Set(catalog.ArtifactIndexKey(meta.Model, p.Name), nil, nil)
	}
	return nil
}

// checkFitted reports whether m's fitted W must be stored, and refuses one
// whose name now holds another W.
func (db *DB) checkFitted(m *SpanMemory) (bool, error) {
	p := &m.Projection
	if p.Fitted == nil {
		return false, nil
	}
	a, ok, err := db.loadArtifact(m.Model.Fingerprint(), p.Name)
	switch {
	case err != nil:
		return false, err
	case ok && a.hash != p.Hash:
		return false, fmt.Errorf("%w: artifact %q was stored with another W since the memory was built; rebuild it", ErrInvalidArgument, p.Name)
	}
	return !ok, nil // the same W may be there already
}

// spanRecords returns the blob file records after the commit: the active
// file grown by n live bytes, the old memory's extent (if any) dead, and
// the files sealed since the last batch.
func (db *DB) spanRecords(a *bloblog.Active, n uint64, old *SpanMeta) []BlobFileInfo {
	r, _ := db.record(a.Num)
	r.Size = a.End + n
	r.LiveBytes += n
	r.Extents++
	r.LiveExtents++
	recs := []BlobFileInfo{r}
	for _, num := range db.w.Sealed {
		if s, ok := db.record(num); ok && num != a.Num {
			s.Sealed = true
			recs = append(recs, s)
		}
	}
	if old == nil {
		return recs
	}
	for i := range recs {
		if recs[i].Num == old.BlobFile {
			killExtent(&recs[i], old.ExtentLength)
			return recs
		}
	}
	if o, ok := db.record(old.BlobFile); ok {
		killExtent(&o, old.ExtentLength)
		recs = append(recs, o)
	}
	return recs
}

// killExtent moves n bytes and one extent of r from live to dead.
func killExtent(r *BlobFileInfo, n uint64) { r.KillExtent(n) }

// DeleteSpanMemory removes the span memory of context name in namespace
// ns, stored for model, in one synced batch: its root and head records go,
// and its extent's bytes become dead (reclaimed by compaction; readers
// already open keep reading them until released). It is ErrNotFound if
// absent and ErrModelMismatch if stored for another model.
func (db *DB) DeleteSpanMemory(ctx context.Context, ns string, model format.Fingerprint, name string) error {
	return db.write("delete span memory", func() error {
		if err := ctx.Err(); err != nil {
			return err
		}
		return checkContextName(ns, name)
	},
		func() error { return db.deleteSpansLocked(ns, model, name) })
}

// deleteSpansLocked is DeleteSpanMemory; the writer lock is held.
func (db *DB) deleteSpansLocked(ns string, model format.Fingerprint, name string) error {
	m, err := db.spanMeta(ns, name)
	if err != nil {
		return err
	}
	if m.Model != model {
		return fmt.Errorf("%w: delete span memory %q in namespace %q: stored for model %s, not %s",
			ErrModelMismatch, name, ns, m.Model.Short(), model.Short())
	}
	r, ok := db.record(m.BlobFile)
	if !ok || r.LiveBytes < m.ExtentLength || r.LiveExtents == 0 {
		return fmt.Errorf("%w: delete span memory %q: blob file %06d's record does not account for its extent", ErrCorruption, name, m.BlobFile)
	}
	killExtent(&r, m.ExtentLength)
	b := db.cat.DB.NewBatch()
	defer b.Close()
	_ = b.Delete(catalog.SpanMetaKey(ns, name), nil)
	spanmem.DeleteHeads(b, ns, name, m)
	_ = b.Set(catalog.BlobFileKey(r.Num), encodeBlobRecord(&r), nil)
	if err := db.commit(b); err != nil {
		return fmt.Errorf("delete span memory %q: %w", name, err)
	}
	db.setSpanRecords(-1, r)
	return nil
}

// spanMeta reads and checks the root record of (ns, name).
func (db *DB) spanMeta(ns, name string) (*SpanMeta, error) {
	var m *SpanMeta
	found, err := db.cat.Get(catalog.SpanMetaKey(ns, name), func(v []byte) (err error) {
		m, err = decodeSpanMeta(v)
		return err
	})
	switch {
	case err != nil:
		return nil, fmt.Errorf("store: span memory %q in namespace %q: %w", name, ns, err)
	case !found:
		return nil, fmt.Errorf("%w: span memory %q in namespace %q", ErrNotFound, name, ns)
	case m.Context != ComputeContextID(ns, m.Model, name):
		return nil, fmt.Errorf("%w: catalog key of span memory %q in namespace %q holds context %s", ErrCorruption, name, ns, m.Context.Short())
	}
	return m, nil
}
