package store

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/zeebo/blake3"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/reconstruct"
	"github.com/kvstore/kvstore/segment"
	"github.com/kvstore/kvstore/store/internal/bloblog"
	"github.com/kvstore/kvstore/store/internal/catalog"
)

// SpanMemory is SeKV's memory of one long context, as BuildSpanMemory
// makes it and PutSpanMemory stores it: the context cut into spans, the
// resident rows kept at full resolution (anchors and the tokens of spans
// too short to factor), and per (layer, KV head) a summary of every span
// and truncated SVD factors of every factored span's pre-RoPE keys and
// values.
type SpanMemory struct {
	Model        format.ModelSpec
	Tokens       int
	BasePosition int64 // position of row 0 when the memory was built
	Segmentation *segment.Segmentation
	// Resident rows, ascending: every anchor and every token of an
	// unfactored span.
	Resident []int
	// ResidentK and ResidentV hold, per layer, the resident rows
	// [KVHeads][len(Resident)][HeadDim] in Model.DType; keys post-RoPE at
	// local positions (row t rotated for position t), as packets store them.
	ResidentK, ResidentV [][]byte
	// Heads is per (layer, KV head), layer-major.
	Heads       []SpanHead
	FactorDType format.DType
	Projection  ProjectionRef
}

// SpanHead is one (layer, KV head) of a SpanMemory.
type SpanHead struct {
	Summaries []segment.Summary // per span
	// K and V are per span the factors of its pre-RoPE keys and of its
	// values; nil for spans that are not factored.
	K, V []*reconstruct.Factors
}

// ProjectionRef names the routing projection W the summaries were
// projected with.
type ProjectionRef struct {
	Name string   // artifact name (ArtifactRouterW or ArtifactRouterWPCA); "" for none
	Hash [32]byte // BLAKE3-256 of the artifact's data
	Dim  int      // d'
	// Fitted holds the artifact (data and meta) when BuildSpanMemory fitted
	// W itself: PutSpanMemory stores it in the memory's commit.
	Fitted     []byte
	FittedMeta ArtifactMeta
}

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
func (db *DB) PutSpanMemory(ns, name string, m *SpanMemory) (ContextID, error) {
	var (
		id  ContextID
		ext *spanExtent
	)
	err := db.write("put span memory", func() (err error) {
		if err := checkContextName(ns, name); err != nil {
			return err
		}
		if err := m.check(); err != nil {
			return err
		}
		id = ComputeContextID(ns, m.Model.Fingerprint(), name)
		ext, err = layoutSpanExtent(m)
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
func (db *DB) putSpans(ns, name string, m *SpanMemory, id ContextID, ext *spanExtent) error {
	old, err := db.spanMeta(ns, name)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return err
	}
	storeW, err := db.checkFitted(m)
	if err != nil {
		return err
	}
	a, err := db.w.Prepare(ext.length)
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
func (db *DB) appendSpans(a *bloblog.Active, ns, name string, m *SpanMemory, id ContextID, ext *spanExtent, old *SpanMeta, storeW bool) error {
	off := a.End
	if err := ext.write(a.F, a.Path, off, id); err != nil {
		return err
	}
	db.st.bytesWritten.Add(ext.length)
	if err := timed(&db.st.blobSyncs, &db.st.blobSyncNanos, a.F.SyncData); err != nil {
		return fmt.Errorf("store: sync blob file %s: %w", a.Path, err)
	}
	meta := ext.meta(m, id, a.Num, off)
	b := db.cat.DB.NewBatch()
	defer b.Close()
	if err := db.spanBatch(b, ns, name, m, meta, ext, old, storeW); err != nil {
		return err
	}
	recs := db.spanRecords(a, ext.length, old)
	for i := range recs {
		_ = b.Set(catalog.BlobFileKey(recs[i].Num), encodeBlobRecord(&recs[i]), nil)
	}
	if a.Fresh {
		_ = b.Set(catalog.KeyNextBlob, encodeSequence(a.Num+1), nil)
	}
	if err := db.commit(b); err != nil {
		return err
	}
	db.w.Committed(ext.length)
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
func (db *DB) spanBatch(b *pebble.Batch, ns, name string, m *SpanMemory, meta *SpanMeta, ext *spanExtent, old *SpanMeta, storeW bool) error {
	if old != nil {
		for l := range old.Layers {
			for h := range old.KVHeads {
				_ = b.Delete(catalog.SpanHeadKey(ns, name, l, h), nil)
			}
		}
	}
	v, err := meta.Encode()
	if err != nil {
		return err
	}
	_ = b.Set(catalog.SpanMetaKey(ns, name), v, nil)
	for g := range m.Heads {
		hm := ext.head(m, g)
		hv, err := hm.Encode(meta)
		if err != nil {
			return err
		}
		_ = b.Set(catalog.SpanHeadKey(ns, name, hm.Layer, hm.Head), hv, nil)
	}
	if err := db.addModel(b, meta.Model, &m.Model); err != nil {
		return err
	}
	if p := &m.Projection; storeW {
		rec, err := format.Seal(kindArtifact, encodeArtifact(meta.Model, p.Name, p.Fitted, &p.FittedMeta, time.Now().UnixNano()))
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
func killExtent(r *BlobFileInfo, n uint64) {
	n = min(n, r.LiveBytes)
	r.LiveBytes -= n
	r.DeadBytes += n
	if r.LiveExtents > 0 {
		r.LiveExtents--
	}
}

// DeleteSpanMemory removes the span memory of context name in namespace
// ns, stored for model, in one synced batch: its root and head records go,
// and its extent's bytes become dead (reclaimed by compaction; readers
// already open keep reading them until released). It is ErrNotFound if
// absent and ErrModelMismatch if stored for another model.
func (db *DB) DeleteSpanMemory(ns string, model format.Fingerprint, name string) error {
	return db.write("delete span memory", func() error { return checkContextName(ns, name) },
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
	for l := range m.Layers {
		for h := range m.KVHeads {
			_ = b.Delete(catalog.SpanHeadKey(ns, name, l, h), nil)
		}
	}
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

// check validates a SpanMemory before anything is written. Errors wrap
// ErrInvalidArgument.
func (m *SpanMemory) check() error {
	bad := func(f string, args ...any) error {
		return fmt.Errorf("%w: span memory: %s", ErrInvalidArgument, fmt.Sprintf(f, args...))
	}
	if err := m.Model.Validate(); err != nil {
		return fmt.Errorf("span memory: %w", err)
	}
	spec, seg := &m.Model, m.Segmentation
	switch {
	case m.Tokens < 1 || uint64(m.Tokens) > math.MaxUint32:
		return bad("%d tokens", m.Tokens)
	case seg == nil || seg.Tokens != m.Tokens || len(seg.Spans) == 0:
		return bad("no segmentation of its %d tokens", m.Tokens)
	case !m.FactorDType.Float():
		return bad("factor dtype %v", m.FactorDType)
	case len(m.Heads) != spec.Layers*spec.KVHeads || len(m.ResidentK) != spec.Layers || len(m.ResidentV) != spec.Layers:
		return bad("%d heads, %d K and %d V resident layers for %d layers x %d kv heads",
			len(m.Heads), len(m.ResidentK), len(m.ResidentV), spec.Layers, spec.KVHeads)
	case m.Projection.Dim < 0 || m.Projection.Dim > spec.HeadDim || (m.Projection.Dim == 0) != (m.Projection.Name == ""):
		return bad("projection %q of dim %d", m.Projection.Name, m.Projection.Dim)
	}
	if err := m.Projection.checkFitted(spec); err != nil {
		return err
	}
	rowBytes := spec.KVHeads * len(m.Resident) * spec.HeadDim * spec.DType.Size()
	for l := range spec.Layers {
		if len(m.ResidentK[l]) != rowBytes || len(m.ResidentV[l]) != rowBytes {
			return bad("layer %d: resident K %d, V %d bytes, want %d", l, len(m.ResidentK[l]), len(m.ResidentV[l]), rowBytes)
		}
	}
	for g := range m.Heads {
		if err := m.checkHead(g); err != nil {
			return bad("layer %d head %d: %v", g/spec.KVHeads, g%spec.KVHeads, err)
		}
	}
	return nil
}

// checkHead checks one head's summaries and factors against the spans.
func (m *SpanMemory) checkHead(g int) error {
	h, spans := &m.Heads[g], m.Segmentation.Spans
	if len(h.Summaries) != len(spans) || len(h.K) != len(spans) || len(h.V) != len(spans) {
		return fmt.Errorf("%d summaries, %d K and %d V factors for %d spans", len(h.Summaries), len(h.K), len(h.V), len(spans))
	}
	for s, sp := range spans {
		for _, f := range []*reconstruct.Factors{h.K[s], h.V[s]} {
			switch {
			case sp.Factored && f == nil:
				return fmt.Errorf("span %d is factored but has no factors", s)
			case !sp.Factored && f != nil:
				return fmt.Errorf("span %d is not factored but has factors", s)
			case f != nil && (f.Rows != sp.Len() || f.Cols != m.Model.HeadDim):
				return fmt.Errorf("span %d of %d tokens has %dx%d factors", s, sp.Len(), f.Rows, f.Cols)
			}
		}
	}
	return nil
}

// checkFitted checks that a fitted W is what Hash and Dim say.
func (p *ProjectionRef) checkFitted(spec *format.ModelSpec) error {
	if p.Fitted == nil {
		return nil
	}
	ps, err := decodeProjections(p.Fitted, p.FittedMeta, spec.Layers, spec.KVHeads, spec.HeadDim)
	switch {
	case err != nil:
		return fmt.Errorf("span memory: fitted W: %w", err)
	case blake3.Sum256(p.Fitted) != p.Hash || ps[0].Dim != p.Dim:
		return fmt.Errorf("%w: span memory: fitted W does not match its hash or dim %d", ErrInvalidArgument, p.Dim)
	}
	return nil
}
