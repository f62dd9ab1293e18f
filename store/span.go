package store

import (
	"context"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store/internal/bloblog"
	"github.com/kvstore/kvstore/store/internal/spandb"
	"github.com/kvstore/kvstore/store/internal/spanmem"
)

// ErrSpanNotSmaller: BuildSpanMemory would make a span memory that takes
// more room once stored (SpanMemory.Size: Stored) than the context's rows
// in the model's dtype (Raw, the raw bf16 rows for a 16-bit model): its
// rows do not compress enough to pay for what every memory carries (the
// summaries and records, the extent's padding and trailer), as for short
// contexts and rows of noise. Store the context as a packet (Put) instead;
// SpanOptions.FactorAll builds the memory anyway.
var ErrSpanNotSmaller = spanmem.ErrNotSmaller

// BuildSpanMemory builds the span memory of a context from its KV cache
// (spanmem.Build), reading the model's SeKV artifacts from db: keys are
// un-rotated at their positions, the context is segmented by surprisal,
// every span is summarised per (layer, KV head) and its summary key
// projected by W, and each factored span's pre-RoPE keys and values get
// truncated SVD factors. A span keeps them only where that makes the
// memory smaller, counting every byte it stores (factors, anchors'
// rows, its summaries and record entries; see SpanMemory.Size), and they
// take less room than its rows in bf16; its rows stay resident otherwise,
// and neighbouring resident spans become one (unless
// SpanOptions.KeepResidentSpans). A memory still larger than
// the context's rows in the model's dtype is refused: ErrSpanNotSmaller.
// SpanOptions.FactorAll turns all of that off.
//
// W is the trained ArtifactRouterW when stored, else a default
// ArtifactRouterWPCA stored earlier, else it is fitted here by PCA of this
// context's pre-RoPE keys per (layer, KV head) and carried in the result
// (ProjectionRef.Fitted) for PutSpanMemory to store, so that every later
// memory of the model routes with the same W. It is deterministic: the
// same input, options and artifacts give the same memory. in's slices are
// only read. Errors wrap ErrInvalidArgument, but for ErrSpanNotSmaller.
func (db *DB) BuildSpanMemory(in *SpanInput, opts *SpanOptions) (*SpanMemory, error) {
	if err := db.enter(); err != nil {
		return nil, err
	}
	defer db.leave()
	m, err := spanmem.Build(toSpanInput(in), toSpanOptions(opts), &dbArtifacts{db: db, in: toSpanInput(in)})
	return fromSpanMemory(m), err
}

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
		id ContextID
		p  *spandb.Put
	)
	err := db.write("put span memory", func() (err error) {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("put span memory: %w", err)
		}
		if err := checkContextName(ns, name); err != nil {
			return err
		}
		in := toSpanMemory(m)
		if err := in.Check(); err != nil {
			return err
		}
		id = ComputeContextID(ns, in.Model.Fingerprint(), name)
		p, err = spandb.NewPut(ns, name, in, id)
		return err
	}, func() error {
		if err := db.putSpans(p); err != nil {
			return fmt.Errorf("put span memory %q: %w", name, err)
		}
		return nil
	})
	return id, err
}

// putSpans writes, syncs and catalogues a span extent in the active blob
// file and installs the records (writer lock held).
func (db *DB) putSpans(p *spandb.Put) error {
	s := db.spans()
	if err := s.Prepare(p); err != nil {
		return err
	}
	a, err := db.w.Prepare(p.Extent.Length)
	if err != nil {
		return err
	}
	if a.Fresh {
		db.addFile(blobRecord{Num: a.Num, Size: a.End})
	}
	recs, added, err := s.Write(p, a, db.w.Sealed)
	if err != nil {
		if a.Fresh {
			db.dropFile(a.Num)
		}
		db.w.Abandon()
		return err
	}
	db.w.Committed(p.Extent.Length)
	db.setSpanRecords(added, recs...)
	spec := p.Memory.Model
	db.models.LoadOrStore(spec.Fingerprint(), &spec)
	return nil
}

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
	}, func() error {
		r, err := db.spans().Delete(ns, model, name)
		if err == nil {
			db.setSpanRecords(-1, r)
		}
		return err
	})
}

// OpenSpanMemory opens the span memory of context name in namespace ns,
// stored for model. It is ErrNotFound if absent and ErrModelMismatch if
// stored for another model (nothing of it is read). Release the reader
// when done.
func (db *DB) OpenSpanMemory(ctx context.Context, ns string, model format.Fingerprint, name string) (*SpanReader, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := db.enter(); err != nil {
		return nil, err
	}
	defer db.leave()
	if err := checkContextName(ns, name); err != nil {
		return nil, err
	}
	r, err := db.spans().Open(ns, model, name)
	return fromSpanReader(r), err
}

// spans is what store/internal/spandb reaches of db; callers are
// inside the gate.
func (db *DB) spans() *spandb.Store {
	return &spandb.Store{Catalog: db.cat, Host: spanHost{db}, Verify: !db.opts.DisableChecksums,
		Closed: ErrClosed, NotFound: ErrNotFound, ModelMismatch: ErrModelMismatch,
		Counters: spanCounters{&db.st}, Views: &db.st.views, BlockTimer: db.st.spanReadLatency.timer,
		SyncData: func(f vfs.File) error { return timed(&db.st.blobSyncs, &db.st.blobSyncNanos, f.SyncData) },
		Wrote:    func(n uint64) { db.st.bytesWritten.Add(n) }}
}

// spanHost gives spandb the DB's gate, registry, models and commit.
type spanHost struct{ db *DB }

func (h spanHost) Enter() error                                           { return h.db.enter() }
func (h spanHost) Leave()                                                 { h.db.leave() }
func (h spanHost) File(num uint32) *bloblog.File                          { return h.db.file(num) }
func (h spanHost) Record(num uint32) (blobRecord, bool)                   { return h.db.record(num) }
func (h spanHost) Commit(b *pebble.Batch) error                           { return h.db.commit(b) }
func (h spanHost) Model(fp format.Fingerprint) (*format.ModelSpec, error) { return h.db.Model(fp) }

func (h spanHost) AddModel(b *pebble.Batch, fp format.Fingerprint, m *format.ModelSpec) error {
	return h.db.addModel(b, fp, m)
}

func (h spanHost) Artifacts(spec *format.ModelSpec) spanmem.Artifacts {
	return &dbArtifacts{db: h.db, in: &spanmem.Input{Model: spec}}
}

// spanCounters counts span block reads in the DB's statistics.
type spanCounters struct{ st *counters }

func (c spanCounters) Read(n uint64)     { c.st.bytesRead.Add(n) }
func (c spanCounters) Verified(n uint64) { c.st.verifiedBytes.Add(n) }
func (c spanCounters) Corrupt()          { c.st.corruptions.Add(1) }
