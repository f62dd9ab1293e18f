package access

import (
	"errors"
	"testing"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store/internal/catalog"
)

// Save commits in batches of about the limit, asking ready before each;
// a refusal stops it, and what it did not write (the refused batch's
// dirty marks and, before Load, its uses) stays for the next save, which
// writes it.
func TestSaveBatchesAndRefusal(t *testing.T) {
	cat := openCatalog(t)
	const n = 200
	b := cat.DB.NewBatch()
	for i := range n {
		_ = b.Set(catalog.HeaderKey("ns", format.PacketID{byte(i), byte(i >> 8)}), []byte("h"), nil)
	}
	if err := cat.Commit(b); err != nil {
		t.Fatal(err)
	}
	tb := &Table{}
	for i := range n {
		tb.Touch(Key{"ns", format.PacketID{byte(i), byte(i >> 8)}})
	}
	var sizes []int
	refuse := errors.New("the catalog cannot take it")
	err := tb.Save(cat, 4096, func(n int) error {
		if len(sizes) == 2 {
			return refuse
		}
		sizes = append(sizes, n)
		return nil
	})
	if !errors.Is(err, refuse) {
		t.Fatalf("Save: %v, want the refusal", err)
	}
	for _, s := range sizes {
		if s > 4096+200 {
			t.Errorf("a batch of %d bytes, limit 4096 (plus one record)", s)
		}
	}
	saved := func() int {
		c := 0
		_ = catalog.Iterate(cat.DB, []byte{catalog.TagAccess}, func(_, _ []byte) error { c++; return nil })
		return c
	}
	first := saved()
	if first == 0 || first == n {
		t.Fatalf("%d records saved before the refusal, want some of %d", first, n)
	}
	dirty := 0
	tb.Each(func(_ Key, e *Entry) {
		if e.Dirty.Load() {
			dirty++
			if e.Uses.Load() != 1 {
				t.Errorf("an unsaved entry lost its use: %d", e.Uses.Load())
			}
		}
	})
	if dirty != n-first {
		t.Fatalf("%d entries still dirty, want the %d not saved", dirty, n-first)
	}
	if err := tb.Save(cat, 4096, nil); err != nil {
		t.Fatal(err)
	}
	if got := saved(); got != n {
		t.Fatalf("%d records after the second save, want %d", got, n)
	}
}
