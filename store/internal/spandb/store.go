package spandb

import (
	"fmt"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store/internal/bloblog"
	"github.com/kvstore/kvstore/store/internal/catalog"
	"github.com/kvstore/kvstore/store/internal/spanmem"
)

// Store is what span memory's calls reach of the store, given explicitly.
// The store builds one per call; spandb never sees the DB. Every field but
// BlockTimer is required.
type Store struct {
	Catalog *catalog.Catalog
	Host    Host
	// Verify checks every block a reader reads against its CRC32C.
	Verify bool
	// Closed, NotFound and ModelMismatch are the store's sentinels, which
	// the errors that mean them wrap, so that errors.Is works with the
	// store's names.
	Closed, NotFound, ModelMismatch error
	// Counters count the blocks readers read; Views counts open readers
	// (up on Open, down on Release).
	Counters spanmem.Counters
	Views    *atomic.Int64
	// BlockTimer, when not nil, times each block read
	// (spanmem.ReaderOptions.BlockTimer).
	BlockTimer func() (done func())
	// SyncData fdatasyncs the blob file a put wrote (the store counts and
	// times it); Wrote counts the bytes it wrote.
	SyncData func(f vfs.File) error
	Wrote    func(n uint64)
}

// Host is the rest of the store that span memory's calls use.
type Host interface {
	// Enter admits a read on the open store (the store's closed error
	// after Close); every successful Enter is paired with Leave. A reader
	// enters for each record it reads after Open.
	Enter() error
	Leave()
	// File takes a reference on blob file num for a reader; nil if the
	// file is not catalogued (or is being retired).
	File(num uint32) *bloblog.File
	// Record returns blob file num's catalogued record.
	Record(num uint32) (catalog.BlobFile, bool)
	// Model returns the model spec catalogued under fp.
	Model(fp format.Fingerprint) (*format.ModelSpec, error)
	// AddModel adds model spec m, fingerprint fp, to b unless it is
	// catalogued.
	AddModel(b *pebble.Batch, fp format.Fingerprint, m *format.ModelSpec) error
	// Commit commits b synced (and counts it).
	Commit(b *pebble.Batch) error
	// Artifacts reads the SeKV artifacts of model spec.
	Artifacts(spec *format.ModelSpec) spanmem.Artifacts
}

// Meta reads and checks the root record of (ns, name): NotFound if there
// is none, format.ErrCorruption if it does not decode or names another
// context.
func (s *Store) Meta(ns, name string) (*format.SpanMeta, error) {
	var m *format.SpanMeta
	found, err := s.Catalog.Get(catalog.SpanMetaKey(ns, name), func(v []byte) (err error) {
		m, err = format.DecodeSpanMeta(v)
		return err
	})
	switch {
	case err != nil:
		return nil, fmt.Errorf("store: span memory %q in namespace %q: %w", name, ns, err)
	case !found:
		return nil, fmt.Errorf("%w: span memory %q in namespace %q", s.NotFound, name, ns)
	case m.Context != format.ComputeContextID(ns, m.Model, name):
		return nil, fmt.Errorf("%w: catalog key of span memory %q in namespace %q holds context %s", format.ErrCorruption, name, ns, m.Context.Short())
	}
	return m, nil
}
