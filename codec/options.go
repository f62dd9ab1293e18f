package codec

import (
	"fmt"

	"github.com/klauspost/compress/zstd"

	"github.com/kvstore/kvstore/format"
)

const (
	// DefaultGroupSize is the int8/int4 group size when Options leaves it 0:
	// KIVI's 32.
	DefaultGroupSize = 32
	// MaxGroupSize is the largest group size the layout can hold (u16).
	MaxGroupSize = 1<<16 - 1
	// DefaultEnergy is the low-rank codec's energy when Options leaves
	// both Rank and Energy 0.
	DefaultEnergy = 0.999
	// RankLimit is the largest Options.Rank and Options.MaxRank: the
	// widest head format allows.
	RankLimit = format.MaxHeadDim
)

// Options are the per-chunk settings of Encode. The zero value is valid and
// means the defaults, except that the low-rank codec's K chunks need RoPE.
// Decode needs none: every chunk records what it needs.
type Options struct {
	// GroupSize is how many elements share one scale and offset in the int8
	// and int4 codecs: tokens per group for keys (per channel), channels
	// per group for values (per token). 0 means DefaultGroupSize.
	GroupSize int
	// ScaleDType is the type of the int8/int4 scales and offsets: f16 (the
	// default when 0) or f32. With f16, a chunk whose range f16 cannot hold
	// is written with f32 parameters.
	ScaleDType format.DType
	// Level is the zstd level of shuffle-zstd, as zstd's command line
	// numbers them (1..22, mapped by zstd.EncoderLevelFromZstd); 0 means 1,
	// the fastest, which the design measured and chose. Literal-only blocks
	// are always entropy coded: shuffled floats have few matches, and the
	// gain is in the literals.
	Level int
	// Rank is the low-rank codec's fixed rank: each head keeps
	// min(Rank, tokens, head_dim) components (fewer only where the head
	// has fewer numerically non-zero ones). 0 means choose by Energy.
	Rank int
	// Energy e in (0, 1] is used by the low-rank codec when Rank is 0:
	// each head keeps the fewest components whose squared singular values
	// reach e times its squared Frobenius norm (of pre-RoPE keys for K),
	// at most MaxRank. 0 means DefaultEnergy.
	Energy float64
	// MaxRank caps the rank Energy chooses; 0 means min(tokens, head_dim),
	// no cap. Without a cap the SVD is exact (LAPACK on the whole head:
	// about 40 ms for 1000 x 128); a cap at least 8 below
	// min(tokens, head_dim) lets it be randomized, several times faster.
	MaxRank int
	// FactorDType is the type of the low-rank factors U, S and Vt: f16
	// (the default when 0), bf16 or f32. With f16, a chunk whose singular
	// values f16 cannot hold is written with f32 factors.
	FactorDType format.DType
	// RoPE is the model's rotary embedding, which the low-rank codec
	// needs for K chunks: keys are stored post-RoPE at positions
	// 0..tokens-1 and are un-rotated before factoring. It is recorded in
	// the chunk, so decoding needs no options. V chunks ignore it.
	RoPE *format.RoPE
}

// EnsureDefaults fills zero fields with their defaults and returns o.
func (o *Options) EnsureDefaults() *Options {
	if o.GroupSize == 0 {
		o.GroupSize = DefaultGroupSize
	}
	if o.ScaleDType == format.DTypeInvalid {
		o.ScaleDType = format.DTypeF16
	}
	if o.Level == 0 {
		o.Level = 1
	}
	if o.Energy == 0 {
		o.Energy = DefaultEnergy
	}
	if o.FactorDType == format.DTypeInvalid {
		o.FactorDType = format.DTypeF16
	}
	return o
}

// Validate checks o after EnsureDefaults: GroupSize in [1, MaxGroupSize],
// ScaleDType f16 or f32, Level in [1, 22], Rank and MaxRank in
// [0, RankLimit], Energy in (0, 1], FactorDType f16, bf16 or f32; else
// ErrInvalidArgument. RoPE is
// checked against the chunk's head dim when a K chunk is encoded.
func (o *Options) Validate() error {
	switch {
	case o.GroupSize < 1 || o.GroupSize > MaxGroupSize:
		return fmt.Errorf("%w: codec: group size %d not in [1, %d]", format.ErrInvalidArgument, o.GroupSize, MaxGroupSize)
	case o.ScaleDType != format.DTypeF16 && o.ScaleDType != format.DTypeF32:
		return fmt.Errorf("%w: codec: scale dtype %v is not f16 or f32", format.ErrInvalidArgument, o.ScaleDType)
	case o.Level < 1 || o.Level > 22:
		return fmt.Errorf("%w: codec: zstd level %d not in [1, 22]", format.ErrInvalidArgument, o.Level)
	case o.Rank < 0 || o.Rank > RankLimit || o.MaxRank < 0 || o.MaxRank > RankLimit:
		return fmt.Errorf("%w: codec: rank %d or max rank %d not in [0, %d]", format.ErrInvalidArgument, o.Rank, o.MaxRank, RankLimit)
	case !(o.Energy > 0 && o.Energy <= 1):
		return fmt.Errorf("%w: codec: energy %v not in (0, 1]", format.ErrInvalidArgument, o.Energy)
	case !o.FactorDType.Float():
		return fmt.Errorf("%w: codec: factor dtype %v is not f16, bf16 or f32", format.ErrInvalidArgument, o.FactorDType)
	}
	return nil
}

// zstdLevel is o.Level as the encoder's level.
func (o *Options) zstdLevel() zstd.EncoderLevel { return zstd.EncoderLevelFromZstd(o.Level) }
