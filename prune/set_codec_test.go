package prune

import (
	"errors"
	"slices"
	"testing"

	"github.com/kvstore/kvstore/format"
)

func TestSetRoundTrip(t *testing.T) {
	s, err := Random(3, 2, 40, 11, 1)
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != 16+6*(4+4*11)+4 {
		t.Fatalf("%d bytes", len(b))
	}
	var got Set
	if err := got.UnmarshalBinary(b); err != nil {
		t.Fatal(err)
	}
	if got.Layers != 3 || got.KVHeads != 2 || got.Tokens != 40 {
		t.Fatalf("shape %+v", got)
	}
	for g := range s.Keep {
		if !slices.Equal(got.Keep[g], s.Keep[g]) {
			t.Fatalf("list %d: %v, want %v", g, got.Keep[g], s.Keep[g])
		}
	}
	if _, err := (&Set{Layers: 1, KVHeads: 1, Tokens: 2, Keep: [][]int32{{3}}}).MarshalBinary(); !errors.Is(err, format.ErrInvalidArgument) {
		t.Fatalf("marshal of an invalid set: %v", err)
	}
}

// TestSetUnmarshalRejects flips every byte and truncates at every length:
// each is ErrCorruption, never a panic.
func TestSetUnmarshalRejects(t *testing.T) {
	s, _ := Random(2, 2, 9, 4, 2)
	b, _ := s.MarshalBinary()
	for i := range b {
		c := slices.Clone(b)
		c[i] ^= 0x40
		var got Set
		if err := got.UnmarshalBinary(c); !errors.Is(err, format.ErrCorruption) {
			t.Fatalf("byte %d flipped: %v", i, err)
		}
	}
	for n := range len(b) {
		var got Set
		if err := got.UnmarshalBinary(b[:n]); !errors.Is(err, format.ErrCorruption) {
			t.Fatalf("truncated to %d: %v", n, err)
		}
	}
}

// FuzzSetUnmarshal: whatever decodes re-encodes to the same bytes.
func FuzzSetUnmarshal(f *testing.F) {
	s, _ := Random(2, 2, 9, 4, 2)
	b, _ := s.MarshalBinary()
	f.Add(b)
	f.Add(b[:20])
	f.Add([]byte("KVKS"))
	f.Fuzz(func(t *testing.T, in []byte) {
		var got Set
		if err := got.UnmarshalBinary(in); err != nil {
			if !errors.Is(err, format.ErrCorruption) {
				t.Fatalf("error %v does not wrap ErrCorruption", err)
			}
			return
		}
		out, err := got.MarshalBinary()
		if err != nil || !slices.Equal(out, in) {
			t.Fatalf("re-encode: %v, %d bytes for %d", err, len(out), len(in))
		}
	})
}
