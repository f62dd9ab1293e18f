package access

import (
	"testing"

	"github.com/cockroachdb/pebble/v2"

	"github.com/kvstore/kvstore/format"
)

// TestPin: SetPin writes and removes the pin record that Pinned and
// CountPins read and DeleteKeys removes; Table.Pin marks an entry the
// table holds and creates none.
func TestPin(t *testing.T) {
	cat := openCatalog(t)
	id, other := format.PacketID{1}, format.PacketID{2}
	commit := func(fn func(b *pebble.Batch)) {
		t.Helper()
		b := cat.DB.NewBatch()
		defer b.Close()
		fn(b)
		if err := cat.Commit(b); err != nil {
			t.Fatal(err)
		}
	}
	check := func(want bool, count int) {
		t.Helper()
		if got, err := Pinned(cat, "ns", id); err != nil || got != want {
			t.Errorf("Pinned = %v, %v; want %v", got, err, want)
		}
		if got, err := Pinned(cat, "other", id); err != nil || got {
			t.Errorf("Pinned in another namespace = %v, %v", got, err)
		}
		if n := CountPins(cat.DB); n != count {
			t.Errorf("CountPins = %d, want %d", n, count)
		}
	}
	check(false, 0)
	commit(func(b *pebble.Batch) { SetPin(b, "ns", id, true); SetPin(b, "ns", other, true) })
	check(true, 2)
	commit(func(b *pebble.Batch) { SetPin(b, "ns", id, false) })
	check(false, 1)
	commit(func(b *pebble.Batch) { SetPin(b, "ns", id, true); DeleteKeys(b, "ns", other) })
	check(true, 1)

	var tab Table
	k := Key{NS: "ns", ID: id}
	tab.Pin(k, true)
	if tab.Entry(k, false) != nil {
		t.Fatal("Pin created an entry")
	}
	e := tab.Entry(k, true)
	tab.Pin(k, true)
	if !e.Pinned {
		t.Error("Pin(true) left the entry unpinned")
	}
	tab.Pin(k, false)
	if e.Pinned {
		t.Error("Pin(false) left the entry pinned")
	}
}
