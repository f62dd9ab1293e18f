package packet

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store/internal/bloblog"
	"github.com/kvstore/kvstore/store/internal/catalog"
)

// batchDB is an in-memory Pebble with a registry of blob file records.
func batchDB(t *testing.T) (*pebble.DB, map[uint32]catalog.BlobFile) {
	t.Helper()
	db, err := pebble.Open("/cat", &pebble.Options{FS: vfs.NewMem(), Logger: quiet{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db, map[uint32]catalog.BlobFile{
		1: {Num: 1, Size: format.BlobHeaderSize + 8192, LiveBytes: 8192, Extents: 2, LiveExtents: 2},
		2: {Num: 2, Size: format.BlobHeaderSize + 4096, LiveBytes: 4096, Extents: 1, LiveExtents: 1},
	}
}

// quiet is a pebble.Logger that logs nothing.
type quiet struct{}

func (quiet) Infof(string, ...any)  {}
func (quiet) Errorf(string, ...any) {}
func (quiet) Fatalf(f string, a ...any) {
	panic(fmt.Sprintf(f, a...))
}

// get reads key's value after b is committed: nil, false when absent.
func get(t *testing.T, db *pebble.DB, key []byte) ([]byte, bool) {
	t.Helper()
	v, c, err := db.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, false
	} else if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return append([]byte{}, v...), true
}

func blobRecord(t *testing.T, db *pebble.DB, num uint32) catalog.BlobFile {
	t.Helper()
	v, ok := get(t, db, catalog.BlobFileKey(num))
	if !ok {
		t.Fatalf("no record of blob file %d", num)
	}
	r, err := catalog.DecodeBlobFile(num, v)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func checkSeqs(t *testing.T, db *pebble.DB, seq uint64, next uint32, fresh bool) {
	t.Helper()
	v, ok := get(t, db, catalog.KeyRecordSeq)
	if got, err := format.DecodeRecordSeq(v); !ok || err != nil || got != seq {
		t.Errorf("record sequence %d (%v, %v), want %d", got, ok, err, seq)
	}
	v, ok = get(t, db, catalog.KeyNextBlob)
	if ok != fresh {
		t.Fatalf("next blob file number written %v, want %v", ok, fresh)
	}
	if got, err := catalog.DecodeSequence(v); fresh && (err != nil || got != next) {
		t.Errorf("next blob file number %d (%v), want %d", got, err, next)
	}
}

// putHeader is the header of a packet written in blob file num.
func putHeader(t *testing.T, num uint32) *format.PacketHeader {
	t.Helper()
	spec := testSpec(2, 2, 8)
	d := randDesc(spec, 5, 1)
	n, err := d.Check()
	if err != nil {
		t.Fatal(err)
	}
	e, err := Encode(d, n, spec.Fingerprint(), idOf(d), 1, true)
	if err != nil {
		t.Fatal(err)
	}
	h := e.header
	place(h, num, format.BlobHeaderSize, &e.Layout, make([]uint32, e.Layout.Chunks))
	return h
}

// TestAddPut: the batch holds the header and its index entry, the active
// file's record with the extent live, the sealed files' records sealed,
// the next record sequence, and the next file number only for a new file.
func TestAddPut(t *testing.T) {
	for _, fresh := range []bool{false, true} {
		db, recs := batchDB(t)
		num := uint32(2)
		if fresh {
			num = 3
			recs[3] = catalog.BlobFile{Num: 3, Size: format.BlobHeaderSize}
		}
		h := putHeader(t, num)
		a := &bloblog.Active{Num: num, End: recs[num].Size, Fresh: fresh}
		x := Appended{A: a, N: 4096, Sealed: []uint32{1}, Seq: 41, Record: func(n uint32) (catalog.BlobFile, bool) { r, ok := recs[n]; return r, ok }}
		b := db.NewBatch()
		out, err := AddPut(b, h, x)
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Commit(pebble.Sync); err != nil {
			t.Fatal(err)
		}
		if len(out) != 2 {
			t.Fatalf("%d records returned, want 2", len(out))
		}
		v, ok := get(t, db, catalog.HeaderKey(h.Namespace, h.ID))
		if !ok {
			t.Fatal("header not written")
		}
		if got, err := format.DecodeHeader(v); err != nil || got.ID != h.ID || got.BlobFile != num || got.Tokens != h.Tokens {
			t.Errorf("header %+v (%v), want packet %s in file %d", got, err, h.ID.Short(), num)
		}
		if _, ok := get(t, db, catalog.IndexKey(h.Namespace, h.Model, h.ID)); !ok {
			t.Error("index entry not written")
		}
		r := blobRecord(t, db, num)
		was := recs[num]
		if r.Size != was.Size+4096 || r.LiveBytes != was.LiveBytes+4096 || r.Extents != was.Extents+1 || r.LiveExtents != was.LiveExtents+1 || r.Sealed {
			t.Errorf("active file's record %+v after a put of 4096 bytes to %+v", r, was)
		}
		if s := blobRecord(t, db, 1); !s.Sealed || s.LiveBytes != recs[1].LiveBytes {
			t.Errorf("sealed file's record %+v, want %+v sealed", s, recs[1])
		}
		checkSeqs(t, db, 42, num+1, fresh)
	}
}

// TestAddDeletes: the batch removes the header and index entry, kills the
// packet's extent in its file's record, counts the tombstone's bytes dead
// in the active file's record (the same record when the packet is in the
// active file), marks sealed files, and advances the sequences.
func TestAddDeletes(t *testing.T) {
	for _, tc := range []struct {
		name          string
		in, active    uint32
		fresh, sealed bool
	}{{"other file", 1, 2, false, false}, {"active file", 2, 2, false, false}, {"sealed, new file", 1, 3, true, true}} {
		t.Run(tc.name, func(t *testing.T) {
			db, recs := batchDB(t)
			if tc.fresh {
				recs[3] = catalog.BlobFile{Num: 3, Size: format.BlobHeaderSize}
			}
			h := &format.PacketHeader{Version: format.FormatMajor, Namespace: "ns", ID: format.PacketID{7}, Model: format.Fingerprint{9}, BlobFile: tc.in, ExtentLength: 4096}
			for _, k := range [][]byte{catalog.HeaderKey("ns", h.ID), catalog.IndexKey("ns", h.Model, h.ID)} {
				if err := db.Set(k, []byte{1}, pebble.Sync); err != nil {
					t.Fatal(err)
				}
			}
			var sealed []uint32
			if tc.sealed {
				sealed = []uint32{1, 2}
			}
			a := &bloblog.Active{Num: tc.active, End: recs[tc.active].Size, Fresh: tc.fresh}
			x := Appended{A: a, N: 4096, Sealed: sealed, Seq: 7, Record: func(n uint32) (catalog.BlobFile, bool) { r, ok := recs[n]; return r, ok }}
			b := db.NewBatch()
			out := AddDeletes(b, []*format.PacketHeader{h}, x)
			if err := b.Commit(pebble.Sync); err != nil {
				t.Fatal(err)
			}
			want := map[uint32]bool{tc.in: true, tc.active: true}
			for _, s := range sealed {
				want[s] = true
			}
			if len(out) != len(want) {
				t.Errorf("%d records returned, want %d", len(out), len(want))
			}
			for _, k := range [][]byte{catalog.HeaderKey("ns", h.ID), catalog.IndexKey("ns", h.Model, h.ID)} {
				if _, ok := get(t, db, k); ok {
					t.Errorf("key %q not deleted", k)
				}
			}
			r := blobRecord(t, db, tc.in)
			wantLive, wantDead := recs[tc.in].LiveBytes-4096, recs[tc.in].DeadBytes+4096
			if tc.in == tc.active {
				wantDead += 4096
			}
			if r.LiveBytes != wantLive || r.DeadBytes != wantDead || r.LiveExtents != recs[tc.in].LiveExtents-1 || r.Sealed != tc.sealed {
				t.Errorf("packet's file record %+v, want live %d dead %d sealed %v", r, wantLive, wantDead, tc.sealed)
			}
			ta := blobRecord(t, db, tc.active)
			if ta.Size != recs[tc.active].Size+4096 || ta.Extents != recs[tc.active].Extents+1 || ta.DeadBytes < 4096 {
				t.Errorf("active file's record %+v after a 4096-byte tombstone on %+v", ta, recs[tc.active])
			}
			checkSeqs(t, db, 8, tc.active+1, tc.fresh)
		})
	}
}

// TestWriteTombstones: the tombstone is one 4 KiB extent at the end of the
// file that bloblog.Scan finds and that decodes back to the tombstone; a
// tombstone that cannot be encoded is ErrInvalidArgument and writes nothing.
func TestWriteTombstones(t *testing.T) {
	fs := vfs.NewMem()
	f, err := fs.Create("/b", vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	a := &bloblog.Active{Num: 1, Path: "/b", F: f, End: format.Alignment}
	ts := &format.Tombstone{Seq: 5, Namespace: "ns", ID: format.PacketID{3}, Model: format.Fingerprint{4}}
	n, err := WriteTombstones(a, []*format.Tombstone{ts})
	if err != nil {
		t.Fatal(err)
	}
	if n != format.Alignment {
		t.Errorf("tombstone extent of %d bytes, want %d", n, format.Alignment)
	}
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	if uint64(st.Size()) != a.End+n {
		t.Errorf("file of %d bytes after the tombstone, want %d", st.Size(), a.End+n)
	}
	bad := *ts
	bad.Namespace = strings.Repeat("n", format.MaxNameLen+1)
	if _, err := WriteTombstones(&bloblog.Active{Num: 1, Path: "/b", F: f, End: a.End + n}, []*format.Tombstone{ts, &bad}); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("tombstone with a long namespace: %v, want ErrInvalidArgument", err)
	}
	if st, _ := f.Stat(); uint64(st.Size()) != a.End+n {
		t.Errorf("a refused tombstone changed the file to %d bytes", st.Size())
	}
}

// TestWriteTombstonesSeveral: several tombstones are consecutive 4 KiB
// extents, each trailer naming its own offset and packet, each record
// decoding back to its tombstone.
func TestWriteTombstonesSeveral(t *testing.T) {
	fs := vfs.NewMem()
	f, err := fs.Create("/b", vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	a := &bloblog.Active{Num: 1, Path: "/b", F: f, End: 2 * format.Alignment}
	ts := []*format.Tombstone{
		{Seq: 5, Namespace: "ns", ID: format.PacketID{3}, Model: format.Fingerprint{4}},
		{Seq: 6, Namespace: "other", ID: format.PacketID{8}, Model: format.Fingerprint{4}},
	}
	n, err := WriteTombstones(a, ts)
	if err != nil || n != 2*format.Alignment {
		t.Fatalf("WriteTombstones: %d bytes, %v; want %d", n, err, 2*format.Alignment)
	}
	for i, want := range ts {
		off := a.End + uint64(i)*format.Alignment
		b := make([]byte, format.Alignment)
		if _, err := f.ReadAt(b, int64(off)); err != nil {
			t.Fatal(err)
		}
		tr, err := format.DecodeTrailer(b[len(b)-format.TrailerSize:])
		if err != nil || tr.Offset != off || tr.Packet != want.ID {
			t.Fatalf("tombstone %d: trailer %+v (%v), want offset %d, packet %s", i, tr, err, off, want.ID.Short())
		}
		got, err := format.DecodeTombstone(b[:tr.PayloadLen])
		if err != nil || *got != *want {
			t.Errorf("tombstone %d: %+v (%v), want %+v", i, got, err, want)
		}
	}
}

// TestAddDeletesSeveral: two packets in two files deleted by two
// tombstones in the active file: both extents dead, 8 KiB of tombstones
// dead in the active file, two extents more, the sequence past the last.
func TestAddDeletesSeveral(t *testing.T) {
	db, recs := batchDB(t)
	hs := []*format.PacketHeader{
		{Version: format.FormatMajor, Namespace: "ns", ID: format.PacketID{7}, Model: format.Fingerprint{9}, BlobFile: 1, ExtentLength: 4096},
		{Version: format.FormatMajor, Namespace: "ns", ID: format.PacketID{8}, Model: format.Fingerprint{9}, BlobFile: 2, ExtentLength: 4096},
	}
	a := &bloblog.Active{Num: 2, End: recs[2].Size}
	x := Appended{A: a, N: 2 * 4096, Seq: 11, Record: func(n uint32) (catalog.BlobFile, bool) { r, ok := recs[n]; return r, ok }}
	b := db.NewBatch()
	if out := AddDeletes(b, hs, x); len(out) != 2 {
		t.Fatalf("%d records returned, want 2", len(out))
	}
	if err := b.Commit(pebble.Sync); err != nil {
		t.Fatal(err)
	}
	r1 := blobRecord(t, db, 1)
	if r1.LiveBytes != recs[1].LiveBytes-4096 || r1.DeadBytes != recs[1].DeadBytes+4096 || r1.LiveExtents != recs[1].LiveExtents-1 {
		t.Errorf("file 1's record %+v from %+v: want one extent dead", r1, recs[1])
	}
	r2 := blobRecord(t, db, 2)
	if r2.Size != recs[2].Size+8192 || r2.Extents != recs[2].Extents+2 || r2.DeadBytes != recs[2].DeadBytes+4096+8192 || r2.LiveExtents != recs[2].LiveExtents-1 {
		t.Errorf("active file's record %+v from %+v: want one extent dead and two tombstones", r2, recs[2])
	}
	checkSeqs(t, db, 12, 3, false)
}
