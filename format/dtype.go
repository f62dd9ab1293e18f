package format

import (
	"encoding/binary"
	"fmt"
	"math"
)

// DType is the storage element type of a tensor. Math is always float32;
// rounding back to a narrower type is round-to-nearest-even.
//
// The numeric values are part of the on-disk format: never renumber them.
type DType uint8

const (
	DTypeInvalid DType = 0
	DTypeF32     DType = 1 // IEEE 754 binary32, little endian
	DTypeF16     DType = 2 // IEEE 754 binary16, little endian
	DTypeBF16    DType = 3 // bfloat16 (top half of a binary32), little endian
	DTypeInt8    DType = 4 // signed 8-bit, scales stored beside (lossy codecs only)
	DTypeU8      DType = 5 // unsigned 8-bit: the bytes of a pruned packet's kept-positions bitmap
)

// Size is the byte size of one element, 0 for an invalid dtype.
func (d DType) Size() int {
	switch d {
	case DTypeF32:
		return 4
	case DTypeF16, DTypeBF16:
		return 2
	case DTypeInt8, DTypeU8:
		return 1
	}
	return 0
}

// Valid reports whether d is a known dtype.
func (d DType) Valid() bool { return d.Size() != 0 }

// Float reports whether d is one of the float storage dtypes (f32, f16, bf16)
// that packets and factors may be stored in.
func (d DType) Float() bool { return d == DTypeF32 || d == DTypeF16 || d == DTypeBF16 }

func (d DType) String() string {
	switch d {
	case DTypeF32:
		return "f32"
	case DTypeF16:
		return "f16"
	case DTypeBF16:
		return "bf16"
	case DTypeInt8:
		return "int8"
	case DTypeU8:
		return "u8"
	}
	return fmt.Sprintf("dtype(%d)", uint8(d))
}

// ParseDType parses the names String returns.
func ParseDType(s string) (DType, error) {
	for _, d := range []DType{DTypeF32, DTypeF16, DTypeBF16, DTypeInt8, DTypeU8} {
		if d.String() == s {
			return d, nil
		}
	}
	return DTypeInvalid, fmt.Errorf("%w: unknown dtype %q", ErrInvalidArgument, s)
}

// BF16ToF32 widens a bfloat16 exactly.
func BF16ToF32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// F32ToBF16 rounds to nearest even; NaN stays a (quiet) NaN.
func F32ToBF16(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7fffffff > 0x7f800000 { // NaN: keep sign, force a quiet payload
		return uint16(b>>16) | 0x0040
	}
	b += 0x7fff + (b>>16)&1
	return uint16(b >> 16)
}

// F16ToF32 widens an IEEE binary16 exactly (subnormals included).
func F16ToF32(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	man := uint32(h) & 0x3ff
	switch {
	case exp == 0x1f: // Inf or NaN
		return math.Float32frombits(sign | 0x7f800000 | man<<13)
	case exp == 0 && man == 0:
		return math.Float32frombits(sign)
	case exp == 0: // subnormal: normalise
		e := uint32(127 - 15 + 1)
		for man&0x400 == 0 {
			man <<= 1
			e--
		}
		man &= 0x3ff
		return math.Float32frombits(sign | e<<23 | man<<13)
	}
	return math.Float32frombits(sign | (exp+127-15)<<23 | man<<13)
}

// F32ToF16 rounds to nearest even, overflowing to infinity and flushing
// values below the smallest subnormal to signed zero; NaN stays NaN.
func F32ToF16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	abs := b & 0x7fffffff
	switch {
	case abs > 0x7f800000: // NaN
		return sign | 0x7e00 | uint16(abs>>13)&0x3ff
	case abs >= 0x477ff000: // rounds to >= 65520: infinity
		return sign | 0x7c00
	case abs >= 0x38800000: // normal half
		// Rebias the exponent, then round the 13 dropped bits to nearest even.
		v := abs - (127-15)<<23
		v += 0xfff + (v>>13)&1
		return sign | uint16(v>>13)
	case abs < 0x33000000: // below half the smallest subnormal: zero
		return sign
	}
	// Subnormal half: shift the full mantissa down, rounding to nearest even.
	exp := abs >> 23
	man := abs&0x7fffff | 0x800000
	shift := 126 - exp // 14..24
	halfway := uint32(1) << (shift - 1)
	rest := man & (1<<shift - 1)
	v := man >> shift
	if rest > halfway || (rest == halfway && v&1 == 1) {
		v++
	}
	return sign | uint16(v)
}

// ToF32 decodes n = len(dst) little-endian elements of a float dtype from src
// into dst. src must hold exactly len(dst)*dt.Size() bytes.
func ToF32(dst []float32, src []byte, dt DType) error {
	if !dt.Float() {
		return fmt.Errorf("%w: ToF32 of %v", ErrInvalidArgument, dt)
	}
	if len(src) != len(dst)*dt.Size() {
		return fmt.Errorf("%w: ToF32: %d bytes for %d %v elements", ErrInvalidArgument, len(src), len(dst), dt)
	}
	switch dt {
	case DTypeF32:
		for i := range dst {
			dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(src[4*i:]))
		}
	case DTypeF16:
		for i := range dst {
			dst[i] = F16ToF32(binary.LittleEndian.Uint16(src[2*i:]))
		}
	case DTypeBF16:
		for i := range dst {
			dst[i] = BF16ToF32(binary.LittleEndian.Uint16(src[2*i:]))
		}
	}
	return nil
}

// FromF32 encodes src into dst as little-endian elements of a float dtype,
// rounding to nearest even. dst must hold exactly len(src)*dt.Size() bytes.
func FromF32(dst []byte, src []float32, dt DType) error {
	if !dt.Float() {
		return fmt.Errorf("%w: FromF32 to %v", ErrInvalidArgument, dt)
	}
	if len(dst) != len(src)*dt.Size() {
		return fmt.Errorf("%w: FromF32: %d bytes for %d %v elements", ErrInvalidArgument, len(dst), len(src), dt)
	}
	switch dt {
	case DTypeF32:
		for i, f := range src {
			binary.LittleEndian.PutUint32(dst[4*i:], math.Float32bits(f))
		}
	case DTypeF16:
		for i, f := range src {
			binary.LittleEndian.PutUint16(dst[2*i:], F32ToF16(f))
		}
	case DTypeBF16:
		for i, f := range src {
			binary.LittleEndian.PutUint16(dst[2*i:], F32ToBF16(f))
		}
	}
	return nil
}
