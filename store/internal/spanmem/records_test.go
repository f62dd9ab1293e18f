package spanmem

import (
	"log/slog"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store/internal/catalog"
)

// TestSetRecords writes a memory's records over an older memory of the
// same name with more layers: its root and every head read back, and the
// old memory's extra head records are gone.
func TestSetRecords(t *testing.T) {
	m, err := Build(testInput(t, 64, 5), &testOptions, &artifacts{})
	if err != nil {
		t.Fatal(err)
	}
	e, err := LayoutExtent(m)
	if err != nil {
		t.Fatal(err)
	}
	cat, err := catalog.Open("catalog", &catalog.Options{FS: vfs.NewMem(), CacheSize: 1 << 20, MemTableSize: 1 << 20,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	id := format.ComputeContextID("ns", m.Model.Fingerprint(), "ctx")
	meta := e.Meta(m, id, 1, format.BlobHeaderSize)
	old := *meta
	old.Layers++ // the replaced memory had a layer more
	b := cat.DB.NewBatch()
	stray := catalog.SpanHeadKey("ns", "ctx", old.Layers-1, 0)
	_ = b.Set(stray, []byte("old head"), nil)
	if err := cat.Commit(b); err != nil {
		t.Fatal(err)
	}
	b = cat.DB.NewBatch()
	if err := SetRecords(b, "ns", "ctx", m, meta, e, &old); err != nil {
		t.Fatal(err)
	}
	if err := cat.Commit(b); err != nil {
		t.Fatal(err)
	}
	if found, err := cat.Has(stray); err != nil || found {
		t.Fatalf("old memory's head record still there: %v, %v", found, err)
	}
	var got *format.SpanMeta
	if _, err := cat.Get(catalog.SpanMetaKey("ns", "ctx"), func(v []byte) (err error) {
		got, err = format.DecodeSpanMeta(v)
		return err
	}); err != nil || got == nil || got.Context != id {
		t.Fatalf("root record: %v", err)
	}
	heads := 0
	for l := range meta.Layers {
		for h := range meta.KVHeads {
			found, err := cat.Get(catalog.SpanHeadKey("ns", "ctx", l, h), func(v []byte) error {
				hm, err := format.DecodeHeadMeta(v, got)
				if err == nil && (hm.Layer != l || hm.Head != h) {
					t.Errorf("record of layer %d head %d under the key of layer %d head %d", hm.Layer, hm.Head, l, h)
				}
				return err
			})
			if err != nil || !found {
				t.Fatalf("layer %d head %d: found %v, %v", l, h, found, err)
			}
			heads++
		}
	}
	if heads != len(m.Heads) {
		t.Fatalf("%d head records, the memory has %d heads", heads, len(m.Heads))
	}
}
