package store

import (
	"context"
	"fmt"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/reconstruct"
	"github.com/kvstore/kvstore/store/internal/bloblog"
	"github.com/kvstore/kvstore/store/internal/catalog"
	"github.com/kvstore/kvstore/store/internal/spanmem"
)

// SpanReader reads one stored span memory piece by piece: the root record
// is read when it is opened, each (layer, KV head)'s record on first use,
// and each block (one layer's resident rows, one span's K or V factors of
// one head) only when asked for, verified against its own CRC32C. Nothing
// else of the memory is touched.
//
// Like a View it pins its blob file: the bytes stay valid, even if the
// memory is deleted, replaced or moved by compaction, until Release. Head
// records come from the catalog on first use, so the first Head, Summaries
// or Factors call of each head needs the DB open, and is ErrNotFound if the
// memory was deleted or replaced since the reader was opened (heads
// already read stay readable); a memory only moved by compaction reads
// on. Returned byte slices may alias a read-only mapping: do not write to
// them or use them after Release. A SpanReader is safe for concurrent use.
//
// It is store/internal/spanmem's Reader.
type SpanReader = spanmem.Reader

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
	for range maxGetAttempts {
		m, err := db.spanMeta(ns, name)
		if err != nil {
			return nil, err
		}
		if m.Model != model {
			return nil, fmt.Errorf("%w: span memory %q in namespace %q was stored for model %s, not %s",
				ErrModelMismatch, name, ns, m.Model.Short(), model.Short())
		}
		f := db.file(m.BlobFile)
		if f == nil {
			continue
		}
		r, err := db.newSpanReader(ns, name, m, f)
		if err != nil {
			f.Release()
			return nil, err
		}
		db.st.views.Add(1)
		return r, nil
	}
	return nil, fmt.Errorf("%w: span memory %q: blob file missing from the catalog", ErrCorruption, name)
}

func (db *DB) newSpanReader(ns, name string, m *SpanMeta, f *bloblog.File) (*SpanReader, error) {
	spec, err := db.Model(m.Model)
	if err != nil {
		return nil, fmt.Errorf("span memory %q: %w", name, err)
	}
	rope, err := reconstruct.NewRoPE(spec.RoPE, m.HeadDim)
	if err != nil {
		return nil, fmt.Errorf("%w: span memory %q: model spec: %v", ErrCorruption, name, err)
	}
	blocks, err := spanmem.NewBlocks(name, m, f, !db.opts.DisableChecksums, spanCounters{&db.st})
	if err != nil {
		return nil, err
	}
	rec := &spanCatalog{dbArtifacts: dbArtifacts{db: db, in: &SpanInput{Model: spec}}, ns: ns, name: name}
	return spanmem.NewReader(name, m, f, blocks, rope, rec, spanmem.ReaderOptions{
		Closed: ErrClosed, NotFound: ErrNotFound, Released: func() { db.st.views.Add(-1) },
		BlockTimer: db.st.spanReadLatency.timer,
	}), nil
}

// spanCatalog reads a span memory's records for its reader: head
// records and the root from the catalog, artifacts as Build reads them.
type spanCatalog struct {
	dbArtifacts
	ns, name string
}

func (s *spanCatalog) Enter() error { return s.db.enter() }
func (s *spanCatalog) Leave()       { s.db.leave() }

func (s *spanCatalog) Meta() (*SpanMeta, error) { return s.db.spanMeta(s.ns, s.name) }

func (s *spanCatalog) Head(m *SpanMeta, layer, head int) (h *HeadMeta, found bool, err error) {
	found, err = s.db.cat.Get(catalog.SpanHeadKey(s.ns, s.name, layer, head), func(v []byte) (err error) {
		h, err = decodeHeadMeta(v, m)
		return err
	})
	return h, found, err
}

// spanCounters counts span block reads in the DB's statistics.
type spanCounters struct{ st *counters }

func (c spanCounters) Read(n uint64)     { c.st.bytesRead.Add(n) }
func (c spanCounters) Verified(n uint64) { c.st.verifiedBytes.Add(n) }
func (c spanCounters) Corrupt()          { c.st.corruptions.Add(1) }
