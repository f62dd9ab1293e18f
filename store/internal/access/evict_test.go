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
// records, and returns an Evictor over them.
func evictFixture(t *testing.T) (*catalog.Catalog, *Evictor, []*format.PacketHeader) {
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
	rec := catalog.BlobFile{Num: 7, Size: 1 << 20, LiveBytes: 3 * 4096, LiveExtents: 3, Extents: 3}
	e := &Evictor{Catalog: cat, Commit: cat.Commit,
		Header: func(ns string, id format.PacketID) (*format.PacketHeader, error) {
			for _, h := range hs {
				if h.Namespace == ns && h.ID == id {
					return h, nil
				}
			}
			return nil, errors.New("no such header")
		},
		Record: func(num uint32) (catalog.BlobFile, bool) { return rec, num == rec.Num },
	}
	return cat, e, hs
}

// Evict deletes every record of the packets in one batch and returns the
// headers and the blob file record with their extents dead.
func TestEvict(t *testing.T) {
	cat, e, hs := evictFixture(t)
	got, recs, err := e.Evict([]Victim{{Key: Key{"ns", hs[0].ID}}, {Key: Key{"ns", hs[1].ID}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0] != hs[0] || got[1] != hs[1] {
		t.Fatalf("headers %v", got)
	}
	if len(recs) != 1 || recs[0].Num != 7 || recs[0].LiveBytes != 0 || recs[0].DeadBytes != 3*4096 || recs[0].LiveExtents != 1 {
		t.Fatalf("records %+v, want file 7 with both extents dead", recs)
	}
	var stored catalog.BlobFile
	if _, err := cat.Get(catalog.BlobFileKey(7), func(v []byte) (err error) { stored, err = catalog.DecodeBlobFile(7, v); return err }); err != nil || stored != recs[0] {
		t.Fatalf("catalogued record %+v (%v), want %+v", stored, err, recs[0])
	}
	for _, h := range hs {
		for _, k := range [][]byte{catalog.HeaderKey(h.Namespace, h.ID), catalog.IndexKey(h.Namespace, h.Model, h.ID),
			catalog.AccessKey(h.Namespace, h.ID), catalog.PinKey(h.Namespace, h.ID)} {
			if ok, err := cat.Has(k); err != nil || ok {
				t.Errorf("key %x of evicted packet %s kept (%v)", k, h.ID.Short(), err)
			}
		}
	}
}

// Evict commits nothing when a header or a record is missing, and wraps a
// failed commit.
func TestEvictErrors(t *testing.T) {
	cat, e, hs := evictFixture(t)
	if _, _, err := e.Evict([]Victim{{Key: Key{"ns", hs[0].ID}}, {Key: key(5)}}); err == nil {
		t.Fatal("evicting an absent packet succeeded")
	}
	if ok, _ := cat.Has(catalog.HeaderKey("ns", hs[0].ID)); !ok {
		t.Fatal("a failed eviction deleted a packet")
	}
	hs[1].BlobFile = 8
	if _, _, err := e.Evict([]Victim{{Key: Key{"ns", hs[1].ID}}}); !errors.Is(err, format.ErrCorruption) {
		t.Fatalf("packet in an uncatalogued blob file: %v, want ErrCorruption", err)
	}
	e.Commit = func(*pebble.Batch) error { return errors.New("commit failed") }
	if _, _, err := e.Evict([]Victim{{Key: Key{"ns", hs[0].ID}}}); err == nil {
		t.Fatal("a failed commit was not an error")
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
	cat, _, hs := evictFixture(t)
	if n := CountPins(cat.DB); n != 2 {
		t.Fatalf("%d pins, want 2", n)
	}
	tb := &Table{}
	tb.Touch(Key{"ns", hs[0].ID})
	if err := tb.Save(cat); err != nil {
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
