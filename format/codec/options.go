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
)

// Options are the per-chunk settings of Encode. The zero value is valid and
// means the defaults. Decode needs none: every chunk records what it needs.
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
	return o
}

// Validate checks o after EnsureDefaults: GroupSize in [1, MaxGroupSize],
// ScaleDType f16 or f32, Level in [1, 22]; else ErrInvalidArgument.
func (o *Options) Validate() error {
	switch {
	case o.GroupSize < 1 || o.GroupSize > MaxGroupSize:
		return fmt.Errorf("%w: codec: group size %d not in [1, %d]", format.ErrInvalidArgument, o.GroupSize, MaxGroupSize)
	case o.ScaleDType != format.DTypeF16 && o.ScaleDType != format.DTypeF32:
		return fmt.Errorf("%w: codec: scale dtype %v is not f16 or f32", format.ErrInvalidArgument, o.ScaleDType)
	case o.Level < 1 || o.Level > 22:
		return fmt.Errorf("%w: codec: zstd level %d not in [1, 22]", format.ErrInvalidArgument, o.Level)
	}
	return nil
}

// zstdLevel is o.Level as the encoder's level.
func (o *Options) zstdLevel() zstd.EncoderLevel { return zstd.EncoderLevelFromZstd(o.Level) }
