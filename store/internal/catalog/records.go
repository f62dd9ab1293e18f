package catalog

import (
	"bytes"
	"fmt"
	"sync"

	"github.com/cockroachdb/pebble/v2"

	"github.com/kvstore/kvstore/format"
)

// Header reads packet id's header in namespace ns (its 'h' key). found is
// false, with no error, when there is none. A value that does not decode,
// or the header of another packet under the key, is ErrCorruption.
func (c *Catalog) Header(ns string, id format.PacketID) (h *format.PacketHeader, found bool, err error) {
	found, err = c.Get(HeaderKey(ns, id), func(v []byte) (err error) {
		h, err = format.DecodeHeader(v)
		return err
	})
	switch {
	case err != nil:
		return nil, false, fmt.Errorf("store: header of packet %s in namespace %q: %w", id.Short(), ns, err)
	case !found:
		return nil, false, nil
	case h.ID != id || h.Namespace != ns:
		return nil, false, fmt.Errorf("%w: catalog key of packet %s in namespace %q holds the header of packet %s in %q",
			format.ErrCorruption, id.Short(), ns, h.ID.Short(), h.Namespace)
	}
	return h, true, nil
}

// Model reads the model spec under fingerprint fp (its 'm' key). found is
// false, with no error, when there is none. A value that does not decode,
// or a spec of another fingerprint, is ErrCorruption.
func (c *Catalog) Model(fp format.Fingerprint) (m *format.ModelSpec, found bool, err error) {
	found, err = c.Get(ModelKey(fp), func(v []byte) (err error) {
		m, err = format.DecodeModelSpec(v)
		return err
	})
	switch {
	case err != nil:
		return nil, false, fmt.Errorf("store: model spec %s: %w", fp.Short(), err)
	case !found:
		return nil, false, nil
	case m.Fingerprint() != fp:
		return nil, false, fmt.Errorf("%w: model spec under %s has fingerprint %s", format.ErrCorruption, fp.Short(), m.Fingerprint().Short())
	}
	return m, true, nil
}

// AddModel adds model spec m, fingerprint fp, to b unless the catalog
// already holds it.
func (c *Catalog) AddModel(b *pebble.Batch, fp format.Fingerprint, m *format.ModelSpec) error {
	if ok, err := c.Has(ModelKey(fp)); err != nil || ok {
		return err
	}
	v, err := format.EncodeModelSpec(m)
	if err != nil {
		return fmt.Errorf("store: encode model spec: %w", err)
	}
	return b.Set(ModelKey(fp), v, nil)
}

// Stored says whether packet id is indexed in namespace ns for model ('i'
// key) and, when it is not, whether ns holds it for another model (other:
// its header is there). A header that does not read is Header's error.
func (c *Catalog) Stored(ns string, model format.Fingerprint, id format.PacketID) (indexed, other bool, err error) {
	if ok, err := c.Has(IndexKey(ns, model, id)); err != nil || ok {
		return ok, false, err
	}
	_, other, err = c.Header(ns, id)
	return false, other, err
}

// LoadModels fills cache (as CachedModel does) with up to max of the
// catalogued model specs, in key order, so that the first lookup of a
// model after Open is not a catalog read. A spec that does not decode, or
// is filed under another fingerprint, is skipped: Model reports it when
// it is asked for. Only a failed scan is an error.
func (c *Catalog) LoadModels(cache *sync.Map, max int) error {
	p := []byte{TagModel}
	n := 0
	return c.Scan(p, PrefixEnd(p), func(k, v []byte) (bool, error) {
		m, err := format.DecodeModelSpec(v)
		if err != nil {
			return true, nil
		}
		if fp := m.Fingerprint(); bytes.Equal(k, ModelKey(fp)) {
			cache.Store(fp, m)
			n++
		}
		return n < max, nil
	})
}

// CachedModel is Model through cache (fingerprint -> *format.ModelSpec,
// filled on a catalog read); the spec returned is the caller's copy.
func (c *Catalog) CachedModel(cache *sync.Map, fp format.Fingerprint) (*format.ModelSpec, bool, error) {
	if m, ok := cache.Load(fp); ok {
		cp := *m.(*format.ModelSpec)
		return &cp, true, nil
	}
	m, found, err := c.Model(fp)
	if err != nil || !found {
		return nil, found, err
	}
	cache.Store(fp, m)
	cp := *m
	return &cp, true, nil
}
