package store

import (
	"errors"
	"testing"

	"github.com/kvstore/kvstore/format"
)

func TestBlobRecordRoundTrip(t *testing.T) {
	r := blobRecord{Num: 7, Size: 5 * format.Alignment, LiveBytes: 2 * format.Alignment,
		DeadBytes: 2 * format.Alignment, Extents: 3, LiveExtents: 1, Sealed: true}
	got, err := decodeBlobRecord(7, encodeBlobRecord(&r))
	if err != nil || got != r {
		t.Fatalf("round trip: %+v, %v; want %+v", got, err, r)
	}
	n, err := decodeSequence(encodeSequence(42))
	if err != nil || n != 42 {
		t.Fatalf("sequence: %d, %v", n, err)
	}
}

func TestBlobRecordCorrupt(t *testing.T) {
	good := blobRecord{Num: 1, Size: 2 * format.Alignment, LiveBytes: format.Alignment, Extents: 1, LiveExtents: 1}
	cases := []struct {
		name string
		mk   func() []byte
	}{
		{"flipped bit", func() []byte { v := encodeBlobRecord(&good); v[20] ^= 1; return v }},
		{"truncated", func() []byte { return encodeBlobRecord(&good)[:30] }},
		{"live > size", func() []byte { r := good; r.LiveBytes = 3 * format.Alignment; return encodeBlobRecord(&r) }},
		{"unaligned", func() []byte { r := good; r.Size++; return encodeBlobRecord(&r) }},
		{"live ext > ext", func() []byte {
			r := good
			r.LiveExtents = 2
			return encodeBlobRecord(&r)
		}},
		{"wrong kind", func() []byte { return encodeSequence(1) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := decodeBlobRecord(1, tc.mk()); !errors.Is(err, ErrCorruption) {
				t.Errorf("%s: %v, want ErrCorruption", tc.name, err)
			}
		})
	}
}
