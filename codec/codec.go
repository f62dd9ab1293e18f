package codec

import (
	"fmt"

	"github.com/kvstore/kvstore/format"
)

// Encode appends the stored bytes of the chunk src (d.RawSize() bytes of
// d.DType, tensor order) under codec c to dst and returns the extended
// slice. The result is at most Bound(c, d, opts) bytes longer than dst, and
// Decode turns it back into src exactly for raw and shuffle-zstd, within
// half a scale per element (then rounded to d.DType) for int8 and int4,
// and for low rank into each head's truncated SVD (keys factored pre-RoPE,
// re-rotated), whose error is the energy left out plus the factors'
// rounding. The lossy codecs refuse NaN and infinite elements; low rank
// also refuses a K chunk without opts.RoPE and rows whose norm exceeds
// half the dtype's range (so that any rank decodes to finite values). A
// low-rank chunk can be larger than src: callers keep such a chunk raw.
// Errors wrap format.ErrInvalidArgument; dst is then returned unchanged.
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
	case format.CodecLowRank:
		return encodeLowRank(dst, src, d, &opts)
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
// memory, or a few rows; low rank, a few rows and one head's S and Vt in
// float32 (at most twice their stored bytes), after checking every rank
// and size against len(src).
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
	case format.CodecLowRank:
		return decodeLowRank(dst, src, d)
	}
	return corrupt(c, d, "unknown codec")
}

// Bound is the most bytes Encode appends for a chunk d under codec c with
// opts: exact for raw, int8 and int4 (f32 parameters counted), an upper
// bound for shuffle-zstd and low rank (every head at the largest rank
// opts allow: min(tokens, head_dim), capped by opts.Rank or else
// opts.MaxRank when set; f32 factors counted for f16). It is never above format.MaxStoredLength(d.RawSize()) except for
// low rank, whose chunks of high rank or few tokens can exceed it (the
// store keeps any chunk that is not smaller than raw as raw).
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
	case format.CodecLowRank:
		if n, ok := lowRankBound(d, &opts); ok {
			return n, nil
		}
		return 0, d.invalid("low-rank bound does not fit an int")
	}
	return 0, d.invalid("unknown codec %v", c)
}

// corrupt returns an error wrapping format.ErrCorruption that names the
// codec and the chunk.
func corrupt(c format.Codec, d Desc, msg string, args ...any) error {
	return fmt.Errorf("%w: codec %v: chunk %v: %s", format.ErrCorruption, c, d, fmt.Sprintf(msg, args...))
}
