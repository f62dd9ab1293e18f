package format

import (
	"fmt"
	"math"
	"math/bits"
)

// The positions chunk of a pruned packet: chunk 2*layers of its extent
// (kind positions, dtype u8, always raw), after the last layer's V. Per
// (layer, KV head), layer-major, a bitmap of n = ceil(tokens/8) bytes:
//
//	+----------------------+----------------+-----+--------------------------------+
//	| (layer 0, head 0): n | (0, 1): n      | ... | (layers-1, kv_heads-1): n      |
//	+----------------------+----------------+-----+--------------------------------+
//	position t kept <=> bit t%8 (LSB first) of byte t/8 is set
//
// Each bitmap has exactly kept bits set (the header's KeptTokens), and none
// at or beyond tokens (the last byte's padding bits are zero). The chunk
// has a CRC32C like every chunk (in the packet header).

// PositionsRowBytes is the length of one (layer, KV head) bitmap of a
// packet of tokens rows: ceil(tokens/8).
func PositionsRowBytes(tokens int) int { return (tokens + 7) / 8 }

// AppendPositions appends the positions chunk of keep, one list of kept
// positions (each in [0, tokens)) per (layer, KV head), to dst.
func AppendPositions(dst []byte, tokens int, keep [][]int32) []byte {
	n := PositionsRowBytes(tokens)
	start := len(dst)
	dst = append(dst, make([]byte, len(keep)*n)...)
	b := dst[start:]
	for g, list := range keep {
		row := b[g*n : (g+1)*n]
		for _, t := range list {
			row[t/8] |= 1 << (t % 8)
		}
	}
	return dst
}

// DecodePositions parses the positions chunk b of a packet of layers x
// kvHeads x tokens keeping kept rows per (layer, KV head), checking every
// bitmap: exactly kept bits set, none at or beyond tokens. Anything else is
// ErrCorruption. The lists returned are increasing and share one array.
func DecodePositions(b []byte, layers, kvHeads, tokens, kept int) ([][]int32, error) {
	if tokens < 1 || tokens > math.MaxInt32 || layers < 1 || kvHeads < 1 || kept < 0 || kept > tokens {
		return nil, fmt.Errorf("%w: positions of %d layers x %d heads x %d tokens keeping %d", ErrCorruption, layers, kvHeads, tokens, kept)
	}
	n := PositionsRowBytes(tokens)
	if uint64(len(b)) != uint64(layers)*uint64(kvHeads)*uint64(n) {
		return nil, fmt.Errorf("%w: positions chunk of %d bytes, want %d", ErrCorruption, len(b), uint64(layers)*uint64(kvHeads)*uint64(n))
	}
	pad := byte(0) // the bits past tokens in each bitmap's last byte must be zero
	if r := tokens % 8; r != 0 {
		pad = ^byte(0) << r
	}
	keep := make([][]int32, layers*kvHeads)
	all := make([]int32, len(keep)*kept)
	for g := range keep {
		row := b[g*n : (g+1)*n]
		if row[n-1]&pad != 0 {
			return nil, fmt.Errorf("%w: positions of layer %d head %d: a bit set at or beyond %d tokens",
				ErrCorruption, g/kvHeads, g%kvHeads, tokens)
		}
		ones := 0
		for _, x := range row {
			ones += bits.OnesCount8(x)
		}
		if ones != kept {
			return nil, fmt.Errorf("%w: positions of layer %d head %d: %d bits set, want %d kept",
				ErrCorruption, g/kvHeads, g%kvHeads, ones, kept)
		}
		list := all[g*kept : g*kept : (g+1)*kept]
		for i, x := range row {
			for ; x != 0; x &= x - 1 {
				list = append(list, int32(8*i+bits.TrailingZeros8(x)))
			}
		}
		keep[g] = list
	}
	return keep, nil
}
