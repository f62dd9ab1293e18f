package store

import (
	"context"

	"github.com/kvstore/kvstore/format"
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
	return db.spans().Open(ns, model, name)
}
