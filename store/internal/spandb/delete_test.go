package spandb

import (
	"errors"
	"testing"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store/internal/catalog"
)

func TestDelete(t *testing.T) {
	fx := newFixture(t)
	m := memory(t, fx, 64, 1)
	if _, _, _, err := fx.put("ns", "a", m); err != nil {
		t.Fatal(err)
	}
	meta, err := fx.s.Meta("ns", "a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fx.s.Delete("ns", format.Fingerprint{1}, "a"); !errors.Is(err, errMismatch) {
		t.Fatalf("delete for another model: %v, want the store's model mismatch", err)
	}
	if _, err := fx.s.Delete("ns", m.Model.Fingerprint(), "b"); !errors.Is(err, errNotFound) {
		t.Fatalf("delete of an absent memory: %v, want not found", err)
	}
	r, err := fx.s.Delete("ns", m.Model.Fingerprint(), "a")
	if err != nil {
		t.Fatal(err)
	}
	if r.Num != meta.BlobFile || r.LiveExtents != 0 || r.LiveBytes != 0 || r.DeadBytes != meta.ExtentLength || r.Extents != 1 {
		t.Fatalf("record after delete %+v, want the extent's %d bytes dead", r, meta.ExtentLength)
	}
	var stored catalog.BlobFile
	if _, err := fx.cat.Get(catalog.BlobFileKey(r.Num), func(v []byte) (err error) {
		stored, err = catalog.DecodeBlobFile(r.Num, v)
		return err
	}); err != nil || stored.DeadBytes != r.DeadBytes || stored.LiveExtents != 0 {
		t.Fatalf("catalogued record %+v (%v), want the one returned", stored, err)
	}
	if _, err := fx.s.Meta("ns", "a"); !errors.Is(err, errNotFound) {
		t.Fatalf("after delete: %v, want not found", err)
	}
	for l := range meta.Layers {
		for h := range meta.KVHeads {
			if ok, err := fx.cat.Has(catalog.SpanHeadKey("ns", "a", l, h)); err != nil || ok {
				t.Fatalf("head record (%d, %d) left by delete (%v)", l, h, err)
			}
		}
	}
	if n, err := Count(fx.cat); err != nil || n != 0 {
		t.Fatalf("count %d (%v) after delete, want 0", n, err)
	}
}

func TestDeleteRefusesUnaccountedExtent(t *testing.T) {
	fx := newFixture(t)
	m := memory(t, fx, 64, 1)
	if _, _, _, err := fx.put("ns", "a", m); err != nil {
		t.Fatal(err)
	}
	r := fx.h.recs[1]
	r.LiveBytes = 0
	fx.h.recs[1] = r
	if _, err := fx.s.Delete("ns", m.Model.Fingerprint(), "a"); !errors.Is(err, format.ErrCorruption) {
		t.Fatalf("delete of an extent its file's record does not hold: %v, want ErrCorruption", err)
	}
	if _, err := fx.s.Meta("ns", "a"); err != nil {
		t.Fatalf("a refused delete removed the memory: %v", err)
	}
}
