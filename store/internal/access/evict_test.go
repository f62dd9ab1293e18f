package access

import (
	"errors"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store/internal/catalog"
	"github.com/kvstore/kvstore/store/internal/space"
)

// Room evicts nothing while the extent fits, the least recently used
// first when it does not, and refuses (ErrNoSpace) when no eviction makes
// room.
func TestRoom(t *testing.T) {
	cat := openCatalog(t)
	tb := table(nil, map[byte]int64{1: 40, 2: 10, 3: 30, 4: 20})
	tb.loaded.Store(true) // sizes set by table: no catalog to load
	if vs, err := tb.Room(cat.DB, 400, 100, 500, false); err != nil || len(vs) != 0 {
		t.Fatalf("fits: %v, %v", ids(vs), err)
	}
	vs, err := tb.Room(cat.DB, 400, 250, 500, false)
	if err != nil || string(ids(vs)) != "\x02\x04" {
		t.Fatalf("250 more bytes over 400 of 500: evict %v (%v), want [2 4]", ids(vs), err)
	}
	vs, err = tb.Room(cat.DB, 400, 501, 500, false)
	if !errors.Is(err, space.ErrNoSpace) || vs != nil {
		t.Fatalf("more than the cap: %v, %v, want ErrNoSpace and nothing", ids(vs), err)
	}
}

// evictFixture catalogues two packets of blob file 7 with access and pin
// records, and returns an Evictor over them whose tombstones go to blob
// file 9 (their records are in *got once committed).
func evictFixture(t *testing.T) (*catalog.Catalog, *Evictor, []*format.PacketHeader, *evicted) {
	t.Helper()
	cat := openCatalog(t)
	hs := []*format.PacketHeader{
		{Namespace: "ns", ID: format.PacketID{1}, Model: format.Fingerprint{9}, BlobFile: 7, ExtentLength: 4096},
		{Namespace: "ns", ID: format.PacketID{2}, Model: format.Fingerprint{9}, BlobFile: 7, ExtentLength: 8192},
	}
	b := cat.DB.NewBatch()
	for _, h := range hs {
		_ = b.Set(catalog.HeaderKey(h.Namespace, h.ID), []byte("h"), nil)
		_ = b.Set(catalog.IndexKey(h.Namespace, h.Model, h.ID), nil, nil)
		_ = b.Set(catalog.AccessKey(h.Namespace, h.ID), format.EncodeAccess(1, 1), nil)
		_ = b.Set(catalog.PinKey(h.Namespace, h.ID), nil, nil)
	}
	if err := cat.Commit(b); err != nil {
		t.Fatal(err)
	}
	recs := map[uint32]catalog.BlobFile{
		7: {Num: 7, Size: 1 << 20, LiveBytes: 3 * 4096, LiveExtents: 3, Extents: 3, Sealed: true},
		9: {Num: 9, Size: 4096, LiveBytes: 4096, LiveExtents: 1, Extents: 1},
	}
	record := func(num uint32) (catalog.BlobFile, bool) { r, ok := recs[num]; return r, ok }
	got := &evicted{commit: cat.Commit}
	e := &Evictor{Seq: 40, Record: record,
		Header: func(ns string, id format.PacketID) (*format.PacketHeader, error) {
			for _, h := range hs {
				if h.Namespace == ns && h.ID == id {
					return h, nil
				}
			}
			return nil, errors.New("no such header")
		},
		Tombstones: func(ts []*format.Tombstone, evicted []*format.PacketHeader, add func(*pebble.Batch)) error {
			got.ts, got.hs = ts, evicted
			b := cat.DB.NewBatch()
			defer b.Close()
			add(b)
			for _, h := range evicted { // the store's part (packet.AddDeletes)
				_ = b.Delete(catalog.HeaderKey(h.Namespace, h.ID), nil)
			}
			return got.commit(b)
		},
	}
	return cat, e, hs, got
}

// evicted is what evictFixture's Evictor appended and committed.
type evicted struct {
	ts     []*format.Tombstone
	hs     []*format.PacketHeader
	commit func(*pebble.Batch) error
}

// Evict appends one tombstone per packet, sequences from Seq, and has the
// packets deleted in the tombstones' batch with their access and pin
// records.
func TestEvict(t *testing.T) {
	cat, e, hs, got := evictFixture(t)
	evicted, err := e.Evict([]Victim{{Key: Key{"ns", hs[0].ID}}, {Key: Key{"ns", hs[1].ID}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(evicted) != 2 || evicted[0] != hs[0] || evicted[1] != hs[1] {
		t.Fatalf("headers %v", evicted)
	}
	if len(got.ts) != 2 {
		t.Fatalf("%d tombstones, want 2", len(got.ts))
	}
	for i, ts := range got.ts {
		if h := hs[i]; ts.Seq != 40+uint64(i) || ts.ID != h.ID || ts.Namespace != h.Namespace || ts.Model != h.Model {
			t.Errorf("tombstone %d: %+v, want packet %s at sequence %d", i, ts, h.ID.Short(), 40+i)
		}
	}
	if len(got.hs) != 2 || got.hs[0] != hs[0] || got.hs[1] != hs[1] {
		t.Fatalf("deleted headers %v, want both", got.hs)
	}
	for _, h := range hs {
		for _, k := range [][]byte{catalog.AccessKey(h.Namespace, h.ID), catalog.PinKey(h.Namespace, h.ID)} {
			if ok, err := cat.Has(k); err != nil || ok {
				t.Errorf("key %x of evicted packet %s kept (%v)", k, h.ID.Short(), err)
			}
		}
	}
}

// Evict writes and commits nothing when a header or a record is missing,
// and wraps a failed append or commit.
func TestEvictErrors(t *testing.T) {
	cat, e, hs, got := evictFixture(t)
	if _, err := e.Evict([]Victim{{Key: Key{"ns", hs[0].ID}}, {Key: key(5)}}); err == nil {
		t.Fatal("evicting an absent packet succeeded")
	}
	if ok, _ := cat.Has(catalog.HeaderKey("ns", hs[0].ID)); !ok || got.ts != nil {
		t.Fatalf("a failed eviction deleted a packet (%v) or wrote tombstones (%d)", !ok, len(got.ts))
	}
	hs[1].BlobFile = 8
	if _, err := e.Evict([]Victim{{Key: Key{"ns", hs[1].ID}}}); !errors.Is(err, format.ErrCorruption) || got.ts != nil {
		t.Fatalf("packet in an uncatalogued blob file: %v (%d tombstones), want ErrCorruption and none", err, len(got.ts))
	}
	got.commit = func(*pebble.Batch) error { return errors.New("commit failed") }
	if _, err := e.Evict([]Victim{{Key: Key{"ns", hs[0].ID}}}); err == nil {
		t.Fatal("a failed commit was not an error")
	}
	if ok, _ := cat.Has(catalog.HeaderKey("ns", hs[0].ID)); !ok {
		t.Fatal("an eviction whose commit failed deleted a packet")
	}
}

// Due waits one interval from the first call; a negative one never comes.
func TestDue(t *testing.T) {
	tb := &Table{}
	if tb.Due(-1) || !tb.LastFlush.IsZero() {
		t.Fatal("due with a negative interval")
	}
	if tb.Due(0) || tb.LastFlush.IsZero() {
		t.Fatal("due at the first call: the first interval starts there")
	}
	if !tb.Due(0) {
		t.Fatal("not due after a zero interval")
	}
	if tb.Due(time.Hour) {
		t.Fatal("due before an hour has passed")
	}
}

// Save commits the changed statistics of catalogued packets; CountPins
// counts the pins.
func TestSaveAndCountPins(t *testing.T) {
	cat, _, hs, _ := evictFixture(t)
	if n := CountPins(cat.DB); n != 2 {
		t.Fatalf("%d pins, want 2", n)
	}
	tb := &Table{}
	tb.Touch(Key{"ns", hs[0].ID})
	if err := tb.Save(cat, 1<<20, nil); err != nil {
		t.Fatal(err)
	}
	var uses uint64
	if _, err := cat.Get(catalog.AccessKey("ns", hs[0].ID), func(v []byte) (err error) { _, uses, err = format.DecodeAccess(v); return err }); err != nil || uses != 2 {
		t.Fatalf("saved uses %d (%v), want the saved 1 + 1", uses, err)
	}
	if tb.LastFlush.IsZero() {
		t.Fatal("Save did not record when it saved")
	}
}
