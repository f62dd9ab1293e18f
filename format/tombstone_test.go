package format

import (
	"errors"
	"strings"
	"testing"
)

func TestTombstoneRoundTrip(t *testing.T) {
	for _, ns := range []string{"", "ns", strings.Repeat("n", MaxNameLen)} {
		ts := &Tombstone{Seq: 77, Namespace: ns, ID: PacketID{9, 8, 7}, Model: Fingerprint{1, 2}}
		v, err := EncodeTombstone(ts)
		if err != nil {
			t.Fatal(err)
		}
		if n, _ := ExtentLength(uint64(len(v))); n != Alignment {
			t.Fatalf("namespace of %d bytes: tombstone extent of %d bytes, want one block", len(ns), n)
		}
		got, err := DecodeTombstone(v)
		if err != nil || *got != *ts {
			t.Fatalf("round trip: %+v %v", got, err)
		}
		for i := range v {
			b := append([]byte(nil), v...)
			b[i] ^= 0x04
			if _, err := DecodeTombstone(b); !errors.Is(err, ErrCorruption) && !errors.Is(err, ErrVersion) {
				t.Fatalf("flipped byte %d: %v", i, err)
			}
		}
	}
	if _, err := EncodeTombstone(&Tombstone{Namespace: strings.Repeat("n", MaxNameLen+1)}); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("long namespace: %v", err)
	}
}
