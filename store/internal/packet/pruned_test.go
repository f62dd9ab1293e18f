package packet

import (
	"bytes"
	"errors"
	"reflect"
	"testing"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/prune"
	"github.com/kvstore/kvstore/store/internal/view"
)

// TestDecodePositionsRejects: positions bitmaps that passed their CRC but
// break a rule (length, padding bits, popcount) are format.ErrCorruption, never a
// panic or a wrong set; good ones decode to increasing lists, whether or
// not Tokens is a multiple of 8.
func TestDecodePositionsRejects(t *testing.T) {
	hdr := func(layers, heads, tokens, kept uint32) *format.PacketHeader {
		return &format.PacketHeader{Layers: layers, KVHeads: heads, Tokens: tokens, KeptTokens: kept}
	}
	h6 := hdr(1, 2, 6, 3)      // one byte per head, bits 6 and 7 padding
	h16 := hdr(1, 1, 16, 3)    // two bytes, no padding
	h9 := hdr(2, 1, 9, 2)      // two bytes per head, bits 9..15 padding
	h1 := hdr(1, 2, 1, 1)      // one token: bits 1..7 padding
	big := hdr(1, 1, 1<<31, 1) // positions beyond int32
	for _, tc := range []struct {
		name string
		h    *format.PacketHeader
		b    []byte
		want [][]int32
	}{
		{"6 tokens", h6, []byte{0b100101, 0b011010}, [][]int32{{0, 2, 5}, {1, 3, 4}}},
		{"16 tokens", h16, []byte{0x81, 0x01}, [][]int32{{0, 7, 8}}},
		{"9 tokens good", h9, []byte{0x01, 0x01, 0x06, 0x00}, [][]int32{{0, 8}, {1, 2}}},
		{"1 token", h1, []byte{1, 1}, [][]int32{{0}, {0}}},

		{"short", h6, []byte{0b100101}, nil},
		{"long", h6, []byte{0b100101, 0b011010, 0}, nil},
		{"empty", h6, nil, nil},
		{"padding bit 6", h6, []byte{0b1100100, 0b011010}, nil}, // {2, 5, 6}: 3 bits, one past tokens
		{"padding bit 7", h6, []byte{0b100101, 0b10011000}, nil},
		{"too few bits", h6, []byte{0b000101, 0b011010}, nil},
		{"too many bits", h6, []byte{0b100111, 0b011010}, nil},
		{"no bits", h6, []byte{0b100101, 0}, nil},
		{"16 tokens count", h16, []byte{0x81, 0x03}, nil},
		{"9 tokens count", h9, []byte{0x01, 0x01, 0x00, 0x01}, nil}, // layer 1 keeps only {8}
		{"16 tokens short", h16, []byte{0x81}, nil},
		{"9 tokens padding", h9, []byte{0x01, 0x01, 0x00, 0x03}, nil}, // {8, 9}: 9 is past tokens
		{"9 tokens high byte", h9, []byte{0x01, 0x01, 0x02, 0x80}, nil},
		{"1 token padding", h1, []byte{1, 0b11}, nil},
		{"1 token none", h1, []byte{1, 0}, nil},
		{"1 token high bit", h1, []byte{0x80, 1}, nil},
		{"beyond int32", big, nil, nil},
		{"no tokens in header", hdr(1, 1, 0, 1), nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := view.DecodePositions(tc.h, tc.b)
			if tc.want == nil {
				if !errors.Is(err, format.ErrCorruption) {
					t.Fatalf("decodePositions = %+v, %v; want ErrCorruption", s, err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(s.Keep, tc.want) || s.Tokens != int(tc.h.Tokens) ||
				s.Layers != int(tc.h.Layers) || s.KVHeads != int(tc.h.KVHeads) {
				t.Fatalf("decodePositions = %+v, %v; want %v", s, err, tc.want)
			}
			if err := s.Validate(); err != nil {
				t.Fatalf("decoded set invalid: %v", err)
			}
			if got := EncodePositions(s); !bytes.Equal(got, tc.b) {
				t.Fatalf("EncodePositions = %08b, want %08b", got, tc.b)
			}
		})
	}
}

// TestPositionsBitmapRoundTrip: EncodePositions then view.DecodePositions gives
// back the keep-set, for token counts around byte boundaries, and the
// bitmap is layers x heads x ceil(tokens/8) bytes whatever k is.
func TestPositionsBitmapRoundTrip(t *testing.T) {
	for _, n := range []int{2, 7, 8, 9, 15, 16, 17, 63, 64, 65, 200} {
		for _, k := range []int{1, n / 3, n - 1} {
			if k < 1 {
				continue
			}
			keep, err := prune.Random(3, 2, n, k, uint64(n*100+k))
			if err != nil {
				t.Fatal(err)
			}
			b := EncodePositions(keep)
			if len(b) != 3*2*((n+7)/8) {
				t.Fatalf("n=%d k=%d: %d bytes, want %d", n, k, len(b), 3*2*((n+7)/8))
			}
			h := &format.PacketHeader{Layers: 3, KVHeads: 2, Tokens: uint32(n), KeptTokens: uint32(k)}
			got, err := view.DecodePositions(h, b)
			if err != nil || !reflect.DeepEqual(got, keep) {
				t.Fatalf("n=%d k=%d: decoded %+v, %v; want %+v", n, k, got, err, keep)
			}
		}
	}
}
