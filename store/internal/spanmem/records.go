package spanmem

import (
	"github.com/cockroachdb/pebble/v2"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store/internal/catalog"
)

// SetRecords adds to b memory m's catalog records for context name in
// namespace ns, laid out as ext and rooted at meta: the root record and
// one record per (layer, KV head); the head records of old, the memory it
// replaces (nil for none), are deleted first. Encoding validates them.
func SetRecords(b *pebble.Batch, ns, name string, m *Memory, meta *format.SpanMeta, ext *Extent, old *format.SpanMeta) error {
	if old != nil {
		DeleteHeads(b, ns, name, old)
	}
	v, err := meta.Encode()
	if err != nil {
		return err
	}
	_ = b.Set(catalog.SpanMetaKey(ns, name), v, nil)
	for g := range m.Heads {
		hm := ext.Head(m, g)
		hv, err := hm.Encode(meta)
		if err != nil {
			return err
		}
		_ = b.Set(catalog.SpanHeadKey(ns, name, hm.Layer, hm.Head), hv, nil)
	}
	return nil
}

// DeleteHeads adds to b the deletion of every head record of memory m.
func DeleteHeads(b *pebble.Batch, ns, name string, m *format.SpanMeta) {
	for l := range m.Layers {
		for h := range m.KVHeads {
			_ = b.Delete(catalog.SpanHeadKey(ns, name, l, h), nil)
		}
	}
}
