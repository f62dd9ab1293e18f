package spandb

import (
	"fmt"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store/internal/catalog"
	"github.com/kvstore/kvstore/store/internal/spanmem"
)

// Delete removes the span memory of context name in namespace ns, stored
// for model, in one synced batch: its root and head records go, and its
// extent's bytes become dead in its blob file's record, which it returns
// for the store to install. It is NotFound if absent, ModelMismatch if
// stored for another model, and format.ErrCorruption if the blob file's
// record does not account for the extent. The writer lock is held.
func (s *Store) Delete(ns string, model format.Fingerprint, name string) (catalog.BlobFile, error) {
	m, err := s.Meta(ns, name)
	if err != nil {
		return catalog.BlobFile{}, err
	}
	if m.Model != model {
		return catalog.BlobFile{}, fmt.Errorf("%w: delete span memory %q in namespace %q: stored for model %s, not %s",
			s.ModelMismatch, name, ns, m.Model.Short(), model.Short())
	}
	r, ok := s.Host.Record(m.BlobFile)
	if !ok || r.LiveBytes < m.ExtentLength || r.LiveExtents == 0 {
		return catalog.BlobFile{}, fmt.Errorf("%w: delete span memory %q: blob file %06d's record does not account for its extent", format.ErrCorruption, name, m.BlobFile)
	}
	r.KillExtent(m.ExtentLength)
	b := s.Catalog.DB.NewBatch()
	defer b.Close()
	_ = b.Delete(catalog.SpanMetaKey(ns, name), nil)
	spanmem.DeleteHeads(b, ns, name, m)
	_ = b.Set(catalog.BlobFileKey(r.Num), catalog.EncodeBlobFile(&r), nil)
	if err := s.Host.Commit(b); err != nil {
		return catalog.BlobFile{}, fmt.Errorf("delete span memory %q: %w", name, err)
	}
	return r, nil
}
