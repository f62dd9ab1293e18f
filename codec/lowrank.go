package codec

import (
	"encoding/binary"
	"math"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/reconstruct"
)

// A low-rank chunk is a 72-byte header (factor dtype and the RoPE that
// keys were un-rotated with), a u16 rank per head, then each head's
// factors in reconstruct's encoding (AppendFactors), rows = tokens, cols =
// head_dim. See the package comment for the drawing.
const (
	lowRankHeader = 72
	// lowRankRows is how many rows Decode reconstructs at a time: the
	// batch reconstruct computes at once, a few KiB of scratch.
	lowRankRows = 64
	// lowRankSeed seeds the SVD's sketch, so that a chunk always encodes
	// to the same bytes.
	lowRankSeed = 0x4b56_4c52 // "KVLR"
)

// lowRankLayout is what a checked low-rank chunk's header says.
type lowRankLayout struct {
	fdt     format.DType      // of U, S and Vt
	rope    *reconstruct.RoPE // nil for V chunks
	maxRank int               // the largest head rank
}

// lowRankRank is head h's rank as the ranks table says.
func lowRankRank(src []byte, h int) int {
	return int(binary.LittleEndian.Uint16(src[lowRankHeader+2*h:]))
}

// lowRankFactorLayout is the factor encoding of one head of rank r.
func lowRankFactorLayout(d Desc, r int, fdt format.DType) reconstruct.FactorLayout {
	return reconstruct.FactorLayout{Rows: d.Tokens, Cols: d.HeadDim, Rank: r, DType: fdt}
}

// putRoPE writes cfg into bytes 1..71 of a low-rank header.
func putRoPE(h []byte, cfg *format.RoPE) {
	h[1], h[2] = byte(cfg.Style), byte(cfg.Scaling)
	le := binary.LittleEndian
	le.PutUint32(h[4:], uint32(cfg.RotaryDims))
	for i, v := range []float64{cfg.Theta, cfg.Factor, cfg.LowFreqFactor, cfg.HighFreqFactor} {
		le.PutUint64(h[8+8*i:], math.Float64bits(v))
	}
	le.PutUint64(h[40:], uint64(int64(cfg.OriginalMaxPos)))
	for i, v := range []float64{cfg.BetaFast, cfg.BetaSlow, cfg.AttentionFactor} {
		le.PutUint64(h[48+8*i:], math.Float64bits(v))
	}
}

// parseRoPE reads and checks the RoPE of a low-rank header for d's head
// dim: nil when style byte 1 is 0 and every other RoPE byte is too.
func parseRoPE(h []byte, d Desc) (*reconstruct.RoPE, error) {
	if h[1] == 0 {
		for _, b := range h[2:lowRankHeader] {
			if b != 0 {
				return nil, corrupt(format.CodecLowRank, d, "no RoPE, yet RoPE bytes are not zero")
			}
		}
		return nil, nil
	}
	if h[3] != 0 {
		return nil, corrupt(format.CodecLowRank, d, "reserved byte 3 is %#x, not 0", h[3])
	}
	le := binary.LittleEndian
	f := func(at int) float64 { return math.Float64frombits(le.Uint64(h[at:])) }
	rot, orig := le.Uint32(h[4:]), int64(le.Uint64(h[40:]))
	cfg := format.RoPE{Style: format.RoPEStyle(h[1]), Scaling: format.RoPEScaling(h[2]), RotaryDims: int(rot),
		Theta: f(8), Factor: f(16), LowFreqFactor: f(24), HighFreqFactor: f(32), OriginalMaxPos: int(orig),
		BetaFast: f(48), BetaSlow: f(56), AttentionFactor: f(64)}
	if uint64(cfg.RotaryDims) != uint64(rot) || int64(cfg.OriginalMaxPos) != orig {
		return nil, corrupt(format.CodecLowRank, d, "RoPE rotary dims %d or original max position %d do not fit an int", rot, orig)
	}
	r, err := reconstruct.NewRoPE(cfg, d.HeadDim)
	if err != nil {
		return nil, corrupt(format.CodecLowRank, d, "RoPE: %v", err)
	}
	return r, nil
}

// parseLowRank checks a low-rank chunk's header, ranks and length against
// d before anything of it is used: a float factor dtype, a valid RoPE for
// K chunks and none for V, every rank <= min(tokens, head_dim), and a
// length that is exactly the header, the ranks and every head's factors.
func parseLowRank(src []byte, d Desc) (lowRankLayout, error) {
	c := format.CodecLowRank
	if len(src) < lowRankHeader {
		return lowRankLayout{}, corrupt(c, d, "%d bytes, shorter than its header", len(src))
	}
	l := lowRankLayout{fdt: format.DType(src[0])}
	if !l.fdt.Float() {
		return lowRankLayout{}, corrupt(c, d, "factor dtype %v is not f16, bf16 or f32", l.fdt)
	}
	rope, err := parseRoPE(src, d)
	if err != nil {
		return lowRankLayout{}, err
	}
	if (rope != nil) != (d.Kind == format.ChunkK) {
		return lowRankLayout{}, corrupt(c, d, "RoPE recorded: %v; want one exactly for K chunks", rope != nil)
	}
	l.rope = rope
	if (len(src)-lowRankHeader)/2 < d.Heads {
		return lowRankLayout{}, corrupt(c, d, "%d bytes, too short for %d ranks", len(src), d.Heads)
	}
	total := lowRankHeader + 2*d.Heads
	for h := range d.Heads {
		r := lowRankRank(src, h)
		if r > min(d.Tokens, d.HeadDim) {
			return lowRankLayout{}, corrupt(c, d, "head %d: rank %d > min(tokens, head dim)", h, r)
		}
		l.maxRank = max(l.maxRank, r)
		size := lowRankFactorLayout(d, r, l.fdt).Size()
		if size > len(src)-total {
			return lowRankLayout{}, corrupt(c, d, "%d bytes, too short for head %d's factors", len(src), h)
		}
		total += size
	}
	if total != len(src) {
		return lowRankLayout{}, corrupt(c, d, "%d bytes, header and ranks give %d", len(src), total)
	}
	return l, nil
}

// lowRankBound is the most bytes a low-rank chunk of d takes under o:
// every head at its largest rank, with f32 factors when o asks for f16 (the
// fallback). ok is false when that does not fit an int.
func lowRankBound(d Desc, o *Options) (int, bool) {
	r := min(d.Tokens, d.HeadDim)
	switch {
	case o.Rank > 0:
		r = min(r, o.Rank)
	case o.MaxRank > 0:
		r = min(r, o.MaxRank)
	}
	e := uint64(o.FactorDType.Size())
	if o.FactorDType == format.DTypeF16 {
		e = 4
	}
	t, dim, rr := uint64(d.Tokens), uint64(d.HeadDim), uint64(r)
	per := reconstruct.FactorHeaderSize + (t*rr+rr+rr*dim)*e
	n := lowRankHeader + uint64(d.Heads)*(2+per)
	return int(n), n <= math.MaxInt
}

// lowRankLimit is the largest row norm (of the stored, post-RoPE rows) the
// encoder accepts for dtype dt and RoPE attention scale s: half the
// dtype's finite range over max(s, 1/s). A truncated SVD does not lengthen
// a row, and a rotation keeps pair norms, so every decoded value then stays
// finite whatever the rank.
func lowRankLimit(dt format.DType, s float32) float64 {
	lim := float64(min(finiteLimit(dt), math.MaxFloat32)) / 2
	if s > 0 {
		lim /= max(float64(s), 1/float64(s))
	}
	return lim
}
