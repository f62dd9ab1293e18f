package reconstruct

import (
	"fmt"
	"math"

	"github.com/kvstore/kvstore/format"
)

// RoPE is a model's rotary position embedding with its inverse frequencies
// precomputed. It is immutable and safe for concurrent use.
//
// It follows HF transformers (modeling_rope_utils and apply_rotary_pos_emb):
// pair j of the rotated dimensions turns by the angle pos*InvFreq()[j], pairs
// being (j, j+Rotary()/2) for rotate-half and (2j, 2j+1) for interleaved; the
// dimensions past Rotary() pass through. Two deliberate differences, both
// more precise than HF's float32 path: inverse frequencies and angles are
// computed in float64 (then cos and sin are rounded to float32), so results
// differ from HF by at most about |pos|*2^-24 radians per angle.
//
// A rotated pair is (a*c - b*s, b*c + a*s) with each product rounded to
// float32 before the sum (no fused multiply-add), so every implementation of
// it here (Go, SIMD) gives the same bits.
//
// Dynamic NTK scaling (format.RoPEScalingDynamic) depends on the length of
// the sequence: NewRoPE gives the rotation of sequences of at most
// OriginalMaxPos tokens (the plain base, as HF's formula gives there), and
// AtLength(L) the rotation a sequence of L tokens uses. A packet prefilled
// alone and assembled into a sequence of total length L past OriginalMaxPos
// must be re-rotated from its prefill rotation to AtLength(L) (ReRotate), not
// shifted by a delta: the frequencies themselves change.
type RoPE struct {
	cfg     format.RoPE
	headDim int
	rot     int
	seqLen  int // dynamic: the sequence length invFreq is for; else 0
	invFreq []float64
	scale   float32
}

// NewRoPE validates cfg for a head of headDim dimensions and precomputes its
// inverse frequencies. Errors wrap format.ErrInvalidArgument.
func NewRoPE(cfg format.RoPE, headDim int) (*RoPE, error) {
	// format validates RoPE configs only as part of a ModelSpec; the other
	// fields here are placeholders that always pass.
	spec := format.ModelSpec{Layers: 1, KVHeads: 1, HeadDim: headDim, DType: format.DTypeF32, RoPE: cfg}
	if err := spec.Validate(); err != nil {
		return nil, fmt.Errorf("reconstruct: new rope: %w", err)
	}
	r := &RoPE{cfg: cfg, headDim: headDim, rot: spec.Rotary(), scale: 1}
	if cfg.Scaling == format.RoPEScalingDynamic && r.rot <= 2 {
		return nil, fmt.Errorf("reconstruct: new rope: %w: dynamic scaling needs more than 2 rotary dims, got %d",
			format.ErrInvalidArgument, r.rot)
	}
	r.invFreq = ropeBaseInvFreq(cfg.Theta, r.rot)
	switch cfg.Scaling {
	case format.RoPEScalingDynamic:
		r.seqLen = cfg.OriginalMaxPos // base unchanged at L <= OriginalMaxPos
	case format.RoPEScalingLinear:
		for i := range r.invFreq {
			r.invFreq[i] /= cfg.Factor
		}
	case format.RoPEScalingLlama3:
		ropeLlama3(r.invFreq, cfg)
	case format.RoPEScalingYaRN:
		ropeYaRN(r.invFreq, cfg, r.rot)
		r.scale = float32(ropeYaRNAttentionFactor(cfg))
	}
	return r, nil
}

// AtLength returns the rotation of a sequence of seqLen tokens. Only dynamic
// NTK scaling depends on it: for every other scaling, and for seqLen <=
// OriginalMaxPos, it returns r itself. Past it the base becomes, as in HF's
// _compute_dynamic_ntk_parameters with M = OriginalMaxPos and d = Rotary(),
//
//	theta * (Factor*seqLen/M - (Factor-1))^(d/(d-2))
//
// HF recomputes this whenever a forward pass reaches a longer sequence than
// the ones before it (and returns to the plain base below M); AtLength is
// that rule as a pure function of the length, which is what a fresh model
// computing L tokens in one pass uses.
func (r *RoPE) AtLength(seqLen int) *RoPE {
	if r.cfg.Scaling != format.RoPEScalingDynamic {
		return r
	}
	if seqLen = max(seqLen, r.cfg.OriginalMaxPos); seqLen == r.seqLen {
		return r
	}
	d := float64(r.rot)
	m := float64(r.cfg.OriginalMaxPos)
	base := r.cfg.Theta * math.Pow(r.cfg.Factor*float64(seqLen)/m-(r.cfg.Factor-1), d/(d-2))
	return &RoPE{cfg: r.cfg, headDim: r.headDim, rot: r.rot, seqLen: seqLen,
		invFreq: ropeBaseInvFreq(base, r.rot), scale: 1}
}

// Length is the sequence length a dynamic RoPE's frequencies are for
// (OriginalMaxPos from NewRoPE); 0 for every other scaling.
func (r *RoPE) Length() int { return r.seqLen }

// ReRotate moves one head vector x, rotated by from at position fromPos,
// to the rotation of to at position toPos: Rotate by -fromPos under from,
// then by toPos under to. For RoPEs with the same frequencies this is a
// shift by toPos-fromPos (Shift does it in one rotation); it is the way to
// move a dynamic-NTK key between sequence lengths. It panics if len(x)
// differs from either head dim.
func ReRotate(x []float32, from *RoPE, fromPos int64, to *RoPE, toPos int64) {
	from.Rotate(x, -fromPos)
	to.Rotate(x, toPos)
}

// Config returns the configuration r was built from.
func (r *RoPE) Config() format.RoPE { return r.cfg }

// HeadDim is the length of the head vectors r rotates.
func (r *RoPE) HeadDim() int { return r.headDim }

// Rotary is the number of leading dimensions of a head that rotate.
func (r *RoPE) Rotary() int { return r.rot }

// InvFreq returns the inverse frequency of each rotated pair after scaling,
// Rotary()/2 of them. The slice is a copy.
func (r *RoPE) InvFreq() []float64 { return append([]float64(nil), r.invFreq...) }

// AttentionScale is the factor HF multiplies cos and sin by: YaRN's
// attention factor (mscale), 1 for every other scaling.
func (r *RoPE) AttentionScale() float32 { return r.scale }

// Rotate rotates one head vector x in place by the angles of position pos:
// a pure rotation, without AttentionScale. It panics if len(x) != HeadDim(),
// a programming error like an index out of range.
func (r *RoPE) Rotate(x []float32, pos int64) { r.rotate(x, pos, false) }

// Apply is what a model does to a query or key at position pos: Rotate, with
// cos and sin multiplied by AttentionScale first as HF does (so the rotated
// dimensions come out scaled; the pass-through ones do not). It panics if
// len(x) != HeadDim().
func (r *RoPE) Apply(x []float32, pos int64) { r.rotate(x, pos, true) }

func (r *RoPE) rotate(x []float32, pos int64, apply bool) {
	if len(x) != r.headDim {
		panic(fmt.Sprintf("reconstruct: rope: vector of %d dims, head dim is %d", len(x), r.headDim))
	}
	var buf [2 * 128]float32 // cos and sin on the stack for heads up to 256 dims
	h := r.rot / 2
	cs := r.AppendCosSin(buf[:0], pos, apply)
	shiftRowsF32(x, x, 1, r.headDim, r.rot, r.cfg.Style, cs[:h:h], cs[h:])
}

// RotateBy rotates x by cs, a table AppendCosSin returned for one position
// (with or without apply): bit for bit what Rotate or Apply at that
// position does, without computing the angles again, so that several
// vectors at one position (the KV heads of a token) share one table. It
// panics if len(x) != HeadDim() or len(cs) != Rotary().
func (r *RoPE) RotateBy(x, cs []float32) {
	if len(x) != r.headDim || len(cs) != r.rot {
		panic(fmt.Sprintf("reconstruct: rope: vector of %d dims and table of %d, head dim is %d, rotary %d", len(x), len(cs), r.headDim, r.rot))
	}
	h := r.rot / 2
	shiftRowsF32(x, x, 1, r.headDim, r.rot, r.cfg.Style, cs[:h:h], cs[h:])
}

// AppendCosSin appends to dst the rotation table of position pos and
// returns the extended slice: Rotary()/2 cosines, then Rotary()/2 sines, of
// pos*InvFreq()[j], each computed in float64 and rounded to float32 once.
// With apply, both are then multiplied in float32 by AttentionScale() (when
// it is not 1), as Apply does; without, the table is the pure rotation of
// Rotate and Shift. Every rotation in this package reads its angles from
// this one definition, so a kernel rotating pairs with the table (products
// rounded to float32 before the sum, as RoPE documents) reproduces their
// bits.
func (r *RoPE) AppendCosSin(dst []float32, pos int64, apply bool) []float32 {
	h := len(r.invFreq)
	start := len(dst)
	dst = append(dst, make([]float32, 2*h)...)
	c, s := dst[start:start+h], dst[start+h:start+2*h]
	p := float64(pos)
	for j, f := range r.invFreq {
		sn, cs := math.Sincos(p * f)
		c[j], s[j] = float32(cs), float32(sn)
	}
	if apply && r.scale != 1 {
		for j := range c {
			c[j] *= r.scale
			s[j] *= r.scale
		}
	}
	return dst
}

// ropeBaseInvFreq is theta^(-2j/rot) for each pair j (HF's default rope).
func ropeBaseInvFreq(theta float64, rot int) []float64 {
	inv := make([]float64, rot/2)
	for j := range inv {
		inv[j] = 1 / math.Pow(theta, float64(2*j)/float64(rot))
	}
	return inv
}

// ropeLlama3 applies Llama 3.1's banded scaling (HF
// _compute_llama3_parameters): wavelengths longer than
// original/low_freq_factor are divided by factor, shorter than
// original/high_freq_factor are kept, and the band between is interpolated.
func ropeLlama3(inv []float64, cfg format.RoPE) {
	orig := float64(cfg.OriginalMaxPos)
	lowWavelen := orig / cfg.LowFreqFactor
	highWavelen := orig / cfg.HighFreqFactor
	for j, f := range inv {
		wavelen := 2 * math.Pi / f
		switch {
		case wavelen > lowWavelen:
			inv[j] = f / cfg.Factor
		case wavelen < highWavelen:
			// high frequency: unchanged
		default:
			smooth := (orig/wavelen - cfg.LowFreqFactor) / (cfg.HighFreqFactor - cfg.LowFreqFactor)
			inv[j] = (1-smooth)*f/cfg.Factor + smooth*f
		}
	}
}

// ropeYaRN applies YaRN's frequency blend (HF _compute_yarn_parameters):
// pairs below the correction range keep their frequency (extrapolation),
// pairs above it are divided by factor (interpolation), and a linear ramp
// blends the two across the range. The range's ends are floored and ceiled
// to whole pairs (HF's default truncate = true) unless YaRNNoTruncate.
func ropeYaRN(inv []float64, cfg format.RoPE, rot int) {
	dim := float64(rot)
	base := cfg.Theta
	orig := float64(cfg.OriginalMaxPos)
	correctionDim := func(rotations float64) float64 {
		return dim * math.Log(orig/(rotations*2*math.Pi)) / (2 * math.Log(base))
	}
	low, high := correctionDim(cfg.BetaFast), correctionDim(cfg.BetaSlow)
	if !cfg.YaRNNoTruncate {
		low, high = math.Floor(low), math.Ceil(high)
	}
	low, high = math.Max(low, 0), math.Min(high, dim-1)
	if low == high {
		high += 0.001 // HF's guard against a zero-width ramp
	}
	for j, f := range inv {
		ramp := math.Min(math.Max((float64(j)-low)/(high-low), 0), 1)
		extrapolation := 1 - ramp
		inv[j] = f/cfg.Factor*(1-extrapolation) + f*extrapolation
	}
}

// ropeYaRNAttentionFactor is the configured attention factor or, when it is
// 0, HF's default: get_mscale(factor, mscale)/get_mscale(factor,
// mscale_all_dim) when both are set (DeepSeek), else get_mscale(factor, 1).
func ropeYaRNAttentionFactor(cfg format.RoPE) float64 {
	if cfg.AttentionFactor > 0 {
		return cfg.AttentionFactor
	}
	if cfg.Mscale != 0 && cfg.MscaleAllDim != 0 {
		return ropeGetMscale(cfg.Factor, cfg.Mscale) / ropeGetMscale(cfg.Factor, cfg.MscaleAllDim)
	}
	return ropeGetMscale(cfg.Factor, 1)
}

// ropeGetMscale is YaRN's get_mscale: 0.1*m*ln(s)+1, or 1 for s <= 1.
func ropeGetMscale(s, m float64) float64 {
	if s <= 1 {
		return 1
	}
	return 0.1*m*math.Log(s) + 1
}
