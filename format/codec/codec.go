package codec

import (
	"fmt"

	"github.com/kvstore/kvstore/format"
)

// Encode appends the stored bytes of the chunk src (d.RawSize() bytes of
// d.DType, tensor order) under codec c to dst and returns the extended
// slice. The result is at most Bound(c, d, opts) bytes longer than dst, and
// Decode turns it back into src exactly for raw and shuffle-zstd, and within
// half a scale per element (then rounded to d.DType) for int8 and int4.
// The quantized codecs refuse NaN and infinite elements. Errors wrap
// format.ErrInvalidArgument; dst is then returned unchanged.
func Encode(dst, src []byte, c format.Codec, d Desc, opts Options) ([]byte, error) {
	if err := d.Validate(); err != nil {
		return dst, err
	}
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return dst, err
	}
	if len(src) != d.RawSize() {
		return dst, d.invalid("encode: %d source bytes, want %d", len(src), d.RawSize())
	}
	switch c {
	case format.CodecRaw:
		return append(dst, src...), nil
	case format.CodecShuffleZstd:
		return encodeShuffleZstd(dst, src, d, &opts)
	case format.CodecInt8, format.CodecInt4:
		return encodeQuant(dst, src, c, d, &opts)
	}
	return dst, d.invalid("encode: unknown codec %v", c)
}

// Decode writes the tensor that the stored chunk src encodes under codec c
// into dst, which must be exactly d.RawSize() bytes: a caller's final
// buffer, since decoding needs no full-size intermediate. Bad bytes return
// an error wrapping format.ErrCorruption (an unknown codec included); a
// bad d or dst, format.ErrInvalidArgument. On error dst holds unspecified
// bytes. Decode never panics, and whatever src says it allocates no more
// than one pooled shuffle block (B*E bytes: 128 KiB for bf16 as written,
// 1 MiB at most, never more than d.RawSize()), zstd's bounded working
// memory, or a few rows.
func Decode(dst, src []byte, c format.Codec, d Desc) error {
	if err := d.Validate(); err != nil {
		return err
	}
	if len(dst) != d.RawSize() {
		return d.invalid("decode: destination of %d bytes, want %d", len(dst), d.RawSize())
	}
	switch c {
	case format.CodecRaw:
		if len(src) != len(dst) {
			return corrupt(c, d, "%d stored bytes, want %d", len(src), len(dst))
		}
		copy(dst, src)
		return nil
	case format.CodecShuffleZstd:
		return decodeShuffleZstd(dst, src, d)
	case format.CodecInt8, format.CodecInt4:
		return decodeQuant(dst, src, c, d)
	}
	return corrupt(c, d, "unknown codec")
}

// Bound is the most bytes Encode appends for a chunk d under codec c with
// opts: exact for raw, int8 and int4 (f32 parameters counted), an upper
// bound for shuffle-zstd. It is never above
// format.MaxStoredLength(d.RawSize()).
func Bound(c format.Codec, d Desc, opts Options) (int, error) {
	if err := d.Validate(); err != nil {
		return 0, err
	}
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return 0, err
	}
	switch c {
	case format.CodecRaw:
		return d.RawSize(), nil
	case format.CodecShuffleZstd:
		return shuffleZstdBound(d), nil
	case format.CodecInt8, format.CodecInt4:
		l := newQuantLayout(c, d, opts.GroupSize, format.DTypeF32)
		return l.size(), nil
	}
	return 0, d.invalid("unknown codec %v", c)
}

// corrupt returns an error wrapping format.ErrCorruption that names the
// codec and the chunk.
func corrupt(c format.Codec, d Desc, msg string, args ...any) error {
	return fmt.Errorf("%w: codec %v: chunk %v: %s", format.ErrCorruption, c, d, fmt.Sprintf(msg, args...))
}
