package format

import (
	"errors"
	"slices"
	"testing"
)

func TestPositionsRoundTrip(t *testing.T) {
	keep := [][]int32{{0, 7, 8, 12}, {1, 2, 3, 4}, {9, 10, 11, 12}}
	b := AppendPositions([]byte{0xaa}, 13, keep)
	if len(b) != 1+3*2 || b[0] != 0xaa {
		t.Fatalf("%d bytes appended after the prefix %x", len(b)-1, b[0])
	}
	if b[1] != 0x81 || b[2] != 0x11 { // bits 0, 7 | 8, 12
		t.Fatalf("first bitmap %08b %08b", b[1], b[2])
	}
	got, err := DecodePositions(b[1:], 3, 1, 13, 4)
	if err != nil || !slices.EqualFunc(got, keep, slices.Equal) {
		t.Fatalf("decoded %v, %v", got, err)
	}
}

func TestPositionsRefusals(t *testing.T) {
	good := AppendPositions(nil, 13, [][]int32{{0, 12}, {3, 5}})
	for _, c := range []struct {
		name                        string
		b                           []byte
		layers, heads, tokens, kept int
	}{
		{"length", good[:3], 2, 1, 13, 2},
		{"padding bit", func() []byte { b := slices.Clone(good); b[1] |= 0x80; return b }(), 2, 1, 13, 2},
		{"count", good, 2, 1, 13, 3},
		{"no tokens", nil, 2, 1, 0, 0},
		{"kept > total", good, 2, 1, 13, 14},
		{"shape", good, 1, 1, 13, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			if _, err := DecodePositions(c.b, c.layers, c.heads, c.tokens, c.kept); !errors.Is(err, ErrCorruption) {
				t.Errorf("%s: %v, want ErrCorruption", c.name, err)
			}
		})
	}
}
