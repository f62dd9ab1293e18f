package spandb

import (
	"fmt"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/reconstruct"
	"github.com/kvstore/kvstore/store/internal/bloblog"
	"github.com/kvstore/kvstore/store/internal/catalog"
	"github.com/kvstore/kvstore/store/internal/spanmem"
)

// maxAttempts bounds the re-reads of a root record whose blob file left
// the registry meanwhile (compaction moved the memory), as Get's.
const maxAttempts = 4

// Open opens a reader of the span memory of context name in namespace
// ns, stored for model: NotFound if absent and ModelMismatch if stored
// for another model (nothing of it is read). The caller is inside the
// store's gate; the reader holds a reference on its blob file until
// Release.
func (s *Store) Open(ns string, model format.Fingerprint, name string) (*spanmem.Reader, error) {
	for range maxAttempts {
		m, err := s.Meta(ns, name)
		if err != nil {
			return nil, err
		}
		if m.Model != model {
			return nil, fmt.Errorf("%w: span memory %q in namespace %q was stored for model %s, not %s",
				s.ModelMismatch, name, ns, m.Model.Short(), model.Short())
		}
		f := s.Host.File(m.BlobFile)
		if f == nil {
			continue
		}
		r, err := s.newReader(ns, name, m, f)
		if err != nil {
			f.Release()
			return nil, err
		}
		s.Views.Add(1)
		return r, nil
	}
	return nil, fmt.Errorf("%w: span memory %q: blob file missing from the catalog", format.ErrCorruption, name)
}

// newReader is a reader of root record m in f, which it takes over.
func (s *Store) newReader(ns, name string, m *format.SpanMeta, f *bloblog.File) (*spanmem.Reader, error) {
	spec, err := s.Host.Model(m.Model)
	if err != nil {
		return nil, fmt.Errorf("span memory %q: %w", name, err)
	}
	rope, err := reconstruct.NewRoPE(spec.RoPE, m.HeadDim)
	if err != nil {
		return nil, fmt.Errorf("%w: span memory %q: model spec: %v", format.ErrCorruption, name, err)
	}
	blocks, err := spanmem.NewBlocks(name, m, f, s.Verify, s.Counters)
	if err != nil {
		return nil, err
	}
	rec := &records{Artifacts: s.Host.Artifacts(spec), s: s, ns: ns, name: name}
	return spanmem.NewReader(name, m, f, blocks, rope, rec, spanmem.ReaderOptions{
		Closed: s.Closed, NotFound: s.NotFound, Released: func() { s.Views.Add(-1) },
		BlockTimer: s.BlockTimer,
	}), nil
}

// records reads a memory's records for its reader (spanmem.Records): head
// records and the root from the catalog, artifacts through the Host.
type records struct {
	spanmem.Artifacts
	s        *Store
	ns, name string
}

func (r *records) Enter() error { return r.s.Host.Enter() }
func (r *records) Leave()       { r.s.Host.Leave() }

func (r *records) Meta() (*format.SpanMeta, error) { return r.s.Meta(r.ns, r.name) }

func (r *records) Head(m *format.SpanMeta, layer, head int) (h *format.HeadMeta, found bool, err error) {
	found, err = r.s.Catalog.Get(catalog.SpanHeadKey(r.ns, r.name, layer, head), func(v []byte) (err error) {
		h, err = format.DecodeHeadMeta(v, m)
		return err
	})
	return h, found, err
}
