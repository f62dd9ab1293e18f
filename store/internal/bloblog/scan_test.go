package bloblog

import (
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/kvstore/kvstore/format"
)

// TestScanStopsAtTornExtent writes three extents, tears the last (one
// payload byte changed, as a crash before the sync may leave it), and
// requires Scan to return the first two and stop where the third starts.
func TestScanStopsAtTornExtent(t *testing.T) {
	fs := vfs.NewMem()
	f, err := fs.Create("/b", vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteAt(f, "/b", format.EncodeBlobHeader(1), 0); err != nil {
		t.Fatal(err)
	}
	off := uint64(format.BlobHeaderSize)
	var offs []uint64
	for i, n := range []int{10, 5000, 300} { // one, two and one blocks
		rec := make([]byte, n)
		rec[0] = byte(i + 1)
		l, err := WriteRecordExtent(f, "/b", off, rec, format.PacketID{byte(i)})
		if err != nil {
			t.Fatal(err)
		}
		offs = append(offs, off)
		off += l
	}
	if err := WriteAt(f, "/b", []byte{0xff}, offs[2]+7); err != nil {
		t.Fatal(err)
	}
	var got []uint64
	end, err := Scan(f, "/b", format.BlobHeaderSize, off, func(e *Scanned) error {
		if e.Trailer.Packet != (format.PacketID{byte(len(got))}) || e.Payload[0] != byte(len(got)+1) {
			t.Errorf("extent at %d: %+v", e.Offset, e.Trailer)
		}
		got = append(got, e.Offset)
		return nil
	})
	if err != nil || end != offs[2] || len(got) != 2 || got[1] != offs[1] {
		t.Fatalf("Scan: end %d (want %d), extents at %v, %v", end, offs[2], got, err)
	}
	// From the middle of an extent nothing is found.
	if end, err := Scan(f, "/b", offs[1]+format.Alignment, off, func(*Scanned) error { return nil }); err != nil || end != offs[1]+format.Alignment {
		t.Fatalf("Scan from inside an extent: %d %v", end, err)
	}
}
