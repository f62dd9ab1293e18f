package catalog

import (
	"errors"
	"testing"

	"github.com/kvstore/kvstore/format"
)

func TestBlobFileRoundTrip(t *testing.T) {
	in := BlobFile{Num: 7, Path: "ignored", Size: 1 << 20, LiveBytes: 4096 * 3, DeadBytes: 4096,
		Extents: 4, LiveExtents: 3, Sealed: true, Views: 2}
	got, err := DecodeBlobFile(7, EncodeBlobFile(&in))
	if err != nil {
		t.Fatal(err)
	}
	want := in
	want.Path, want.Views = "", 0 // derived, not stored
	if got != want {
		t.Fatalf("round trip: got %+v, want %+v", got, want)
	}
	b := EncodeBlobFile(&in)
	b[len(b)-1] ^= 0xff
	if _, err := DecodeBlobFile(7, b); !errors.Is(err, format.ErrCorruption) {
		t.Fatalf("flipped record: err %v, want ErrCorruption", err)
	}
}

func TestKillExtent(t *testing.T) {
	r := BlobFile{LiveBytes: 8192, LiveExtents: 2, DeadBytes: 100}
	r.KillExtent(4096)
	if r.LiveBytes != 4096 || r.DeadBytes != 4196 || r.LiveExtents != 1 {
		t.Fatalf("after one kill: %+v", r)
	}
	r.KillExtent(1 << 20) // more than is live: clamped
	r.KillExtent(1)
	if r.LiveBytes != 0 || r.DeadBytes != 8292 || r.LiveExtents != 0 {
		t.Fatalf("after killing past zero: %+v", r)
	}
}
