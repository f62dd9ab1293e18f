package artifact

import (
	"fmt"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store/internal/catalog"
)

// Each calls fn with the description of every artifact in cat, of every
// model, in (model, name) order (the 'A' index's), each record read and
// checked as Get does, stopping at the first error fn returns, which it
// returns. An index entry too short to hold a model, or one without its
// record, is ErrCorruption. The index is read first and the records
// after, so fn may call into the catalog.
func Each(cat *catalog.Catalog, fn func(Info) error) error {
	type key struct {
		model format.Fingerprint
		name  string
	}
	p := []byte{catalog.TagArtifactIndex}
	var keys []key
	err := cat.Scan(p, catalog.PrefixEnd(p), func(k, _ []byte) (bool, error) {
		var fp format.Fingerprint
		if len(k) <= len(p)+len(fp) {
			return false, fmt.Errorf("%w: artifact index key %x is too short", ErrCorruption, k)
		}
		copy(fp[:], k[len(p):])
		keys = append(keys, key{fp, string(k[len(p)+len(fp):])})
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("store: artifact index: %w", err)
	}
	for _, k := range keys {
		info, found, err := Get(cat, k.model, k.name, nil)
		switch {
		case err != nil:
			return err
		case !found:
			return fmt.Errorf("%w: artifact index names %q of model %s, which has no record", ErrCorruption, k.name, k.model.Short())
		}
		if err := fn(info); err != nil {
			return err
		}
	}
	return nil
}
