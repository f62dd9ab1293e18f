package recovery

import (
	"fmt"
	"maps"
	"slices"

	"github.com/cockroachdb/pebble/v2"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store/internal/catalog"
)

// Commit writes the plan to the catalog in one synced batch. The caller
// decides whether it should (a plan that changes nothing still rewrites
// the sequences; a read-only store cannot).
func (p *Plan) Commit() error {
	b := p.s.Catalog.DB.NewBatch()
	defer b.Close()
	if err := p.batch(b); err != nil {
		return fmt.Errorf("store: reconcile: %w", err)
	}
	if err := p.s.Catalog.Commit(b); err != nil {
		return fmt.Errorf("store: reconcile: %w", err)
	}
	return nil
}

// batch adds the reconciled entries to b: packets, models, the blob file
// records that changed, the sequences.
func (p *Plan) batch(b *pebble.Batch) error {
	models := map[format.Fingerprint]bool{}
	for key, s := range p.state {
		k := []byte(key)
		if s.h == nil {
			continue
		}
		v, err := format.EncodeHeader(s.h)
		if err != nil {
			return err
		}
		_ = b.Set(k, v, nil)
		_ = b.Set(catalog.IndexKey(s.h.Namespace, s.h.Model, s.h.ID), nil, nil)
		if !models[s.h.Model] {
			models[s.h.Model] = true
			if err := p.addModel(b, s.rec.spec); err != nil {
				return err
			}
		}
	}
	for _, t := range p.records {
		if s := p.state[t.key()]; t.tomb != nil && s != nil && s.h == nil {
			_ = b.Delete([]byte(t.key()), nil)
			_ = b.Delete(catalog.IndexKey(t.tomb.Namespace, t.tomb.Model, t.tomb.ID), nil)
			if p.s.DropPacket != nil {
				p.s.DropPacket(b, t.tomb.Namespace, t.tomb.ID)
			}
		}
	}
	var last uint32
	for num := range p.recs {
		last = max(last, num)
	}
	for _, num := range slices.Sorted(maps.Keys(p.recs)) {
		r := p.recs[num]
		if num != last && !r.Sealed {
			r.Sealed = true // a newer file was appended to
		}
		if old, ok := p.before[num]; ok && old == r {
			continue
		}
		_ = b.Set(catalog.BlobFileKey(num), catalog.EncodeBlobFile(&r), nil)
	}
	if n := p.NextBlob(); n != p.next || p.s.Full {
		_ = b.Set(catalog.KeyNextBlob, catalog.EncodeSequence(n), nil)
	}
	_ = b.Set(catalog.KeyRecordSeq, format.EncodeRecordSeq(p.NextSeq()), nil)
	return nil
}

// addModel catalogues m unless the catalog has it.
func (p *Plan) addModel(b *pebble.Batch, m *format.ModelSpec) error {
	fp := m.Fingerprint()
	if ok, err := p.s.Catalog.Has(catalog.ModelKey(fp)); err != nil || ok {
		return err
	}
	v, err := format.EncodeModelSpec(m)
	if err != nil {
		return err
	}
	return b.Set(catalog.ModelKey(fp), v, nil)
}
