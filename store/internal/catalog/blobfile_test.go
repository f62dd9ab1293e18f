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
