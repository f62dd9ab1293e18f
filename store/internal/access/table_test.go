package access

import (
	"log/slog"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store/internal/catalog"
)

func key(b byte) Key { return Key{NS: "ns", ID: format.PacketID{b}} }

// table holds packets 1..4 of 100 bytes each, used as given.
func table(uses map[byte]uint64, last map[byte]int64) *Table {
	t := &Table{}
	for b := byte(1); b <= 4; b++ {
		e := t.Entry(key(b), true)
		e.Size = 100
		e.Uses.Store(uses[b])
		e.Last.Store(last[b])
	}
	return t
}

func ids(vs []Victim) []byte {
	var out []byte
	for _, v := range vs {
		out = append(out, v.Key.ID[0])
	}
	return out
}

func TestCandidatesOrder(t *testing.T) {
	tb := table(map[byte]uint64{1: 5, 2: 1, 3: 1, 4: 9}, map[byte]int64{1: 10, 2: 40, 3: 30, 4: 20})
	tb.Entry(key(4), false).Pinned = true
	tb.Entry(key(9), true) // size 0: not loaded, never a candidate
	if got := string(ids(tb.Candidates(false))); got != "\x01\x03\x02" {
		t.Fatalf("LRU order %v, want [1 3 2]", []byte(got))
	}
	if got := string(ids(tb.Candidates(true))); got != "\x03\x02\x01" {
		t.Fatalf("LFU order %v, want [3 2 1]", []byte(got))
	}
}

func TestPlan(t *testing.T) {
	vs := []Victim{{Size: 100}, {Size: 50}, {Size: 200}}
	for _, c := range []struct {
		live, need, limit uint64
		n                 int
		freed             uint64
		ok                bool
	}{
		{live: 300, need: 0, limit: 300, n: 0, freed: 0, ok: true},
		{live: 300, need: 100, limit: 300, n: 1, freed: 100, ok: true},
		{live: 300, need: 120, limit: 300, n: 2, freed: 150, ok: true},
		{live: 400, need: 100, limit: 100, n: 3, freed: 350, ok: false},
	} {
		n, freed, ok := Plan(vs, c.live, c.need, c.limit)
		if n != c.n || freed != c.freed || ok != c.ok {
			t.Errorf("Plan(live %d, need %d, limit %d) = %d %d %v, want %d %d %v", c.live, c.need, c.limit, n, freed, ok, c.n, c.freed, c.ok)
		}
	}
}

func TestTouchAndRemove(t *testing.T) {
	tb := &Table{}
	tb.Touch(key(1))
	tb.Touch(key(1))
	e := tb.Entry(key(1), false)
	if e == nil || e.Uses.Load() != 2 || e.Last.Load() == 0 || !e.Dirty.Load() {
		t.Fatalf("entry after two touches: %+v", e)
	}
	tb.Remove(key(1))
	if tb.Entry(key(1), false) != nil {
		t.Fatal("entry still there after Remove")
	}
}

func openCatalog(t *testing.T) *catalog.Catalog {
	t.Helper()
	cat, err := catalog.Open("catalog", &catalog.Options{FS: vfs.NewMem(), CacheSize: 1 << 20, MemTableSize: 1 << 20,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cat.Close() })
	return cat
}

// TestFlushAndLoad saves a DB's uses on top of the saved ones, drops
// statistics of packets gone from the catalog, and Load refuses a header
// that does not decode.
func TestFlushAndLoad(t *testing.T) {
	cat := openCatalog(t)
	h := &format.PacketHeader{Namespace: "ns", ID: format.PacketID{1}, ExtentLength: 8192, CreatedUnixNs: 5}
	b := cat.DB.NewBatch()
	// Flush only asks whether the header exists; Load decodes it, and
	// refuses this one (the store's capacity tests load real ones).
	_ = b.Set(catalog.HeaderKey("ns", h.ID), []byte("not a header"), nil)
	_ = b.Set(catalog.AccessKey("ns", h.ID), format.EncodeAccess(100, 7), nil)
	if err := cat.Commit(b); err != nil {
		t.Fatal(err)
	}
	tb := &Table{}
	tb.Touch(Key{"ns", h.ID})
	tb.Touch(key(2)) // not catalogued: forgotten by the flush
	fb := cat.DB.NewBatch()
	if err := tb.Flush(cat, fb); err != nil {
		t.Fatal(err)
	}
	if err := fb.Commit(pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if tb.Entry(key(2), false) != nil {
		t.Fatal("statistics of an uncatalogued packet kept")
	}
	var last int64
	var uses uint64
	found, err := cat.Get(catalog.AccessKey("ns", h.ID), func(v []byte) (err error) {
		last, uses, err = format.DecodeAccess(v)
		return err
	})
	if err != nil || !found {
		t.Fatalf("saved statistics: found %v, %v", found, err)
	}
	if uses != 8 || last <= 100 {
		t.Fatalf("saved last %d uses %d, want a later last use and 7+1 uses", last, uses)
	}
	if e := tb.Entry(Key{"ns", h.ID}, false); e.Uses.Load() != 0 || e.Dirty.Load() {
		t.Fatalf("after a flush before Load the DB's count restarts: uses %d dirty %v", e.Uses.Load(), e.Dirty.Load())
	}
	if err := tb.Load(cat.DB); err == nil || tb.Loaded() {
		t.Fatalf("Load over an undecodable header: %v, loaded %v", err, tb.Loaded())
	}
}
