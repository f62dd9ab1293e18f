package format

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"
)

// f16Value is the exact value of a finite binary16, computed from the
// definition in float64; inf comes back as 65536 (the value that would
// follow 65504), which is what round-to-nearest needs.
func f16Value(h uint16) float64 {
	sign := 1.0
	if h&0x8000 != 0 {
		sign = -1
	}
	exp, man := int(h>>10)&0x1f, float64(h&0x3ff)
	switch exp {
	case 0:
		return sign * math.Ldexp(man, -24)
	case 0x1f:
		return sign * 65536
	}
	return sign * math.Ldexp(1024+man, exp-25)
}

// bf16Value is the exact value of a finite bfloat16; inf comes back as
// 2^128, the value that would follow the largest finite one.
func bf16Value(h uint16) float64 {
	sign := 1.0
	if h&0x8000 != 0 {
		sign = -1
	}
	exp, man := int(h>>7)&0xff, float64(h&0x7f)
	switch exp {
	case 0:
		return sign * math.Ldexp(man, -133)
	case 0xff:
		return sign * math.Ldexp(1, 128)
	}
	return sign * math.Ldexp(128+man, exp-134)
}

// nearest rounds a non-NaN x to the 16-bit pattern of the given value
// function, to nearest with ties to even, searching the ordered positive
// patterns 0..inf in float64, where every candidate is exact.
func nearest(x float64, value func(uint16) float64, inf uint16) uint16 {
	var sign uint16
	if math.Signbit(x) {
		sign, x = 0x8000, -x
	}
	lo, hi := uint16(0), inf // value(lo) <= x < value(hi) unless x >= value(inf)
	if x >= value(inf) {
		return sign | inf
	}
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		if value(mid) <= x {
			lo = mid
		} else {
			hi = mid
		}
	}
	dlo, dhi := x-value(lo), value(hi)-x
	if dlo < dhi || (dlo == dhi && lo&1 == 0) {
		return sign | lo
	}
	return sign | hi
}

func TestF16ToF32Exhaustive(t *testing.T) {
	for i := range 1 << 16 {
		h := uint16(i)
		f := F16ToF32(h)
		switch exp := h >> 10 & 0x1f; {
		case exp == 0x1f && h&0x3ff != 0:
			if !math.IsNaN(float64(f)) || math.Signbit(float64(f)) != (h&0x8000 != 0) {
				t.Fatalf("F16ToF32(%#04x) = %v, want a NaN of the same sign", h, f)
			}
		case exp == 0x1f:
			if !math.IsInf(float64(f), 0) || math.Signbit(float64(f)) != (h&0x8000 != 0) {
				t.Fatalf("F16ToF32(%#04x) = %v, want a signed infinity", h, f)
			}
		default:
			if float64(f) != f16Value(h) || math.Signbit(float64(f)) != (h&0x8000 != 0) {
				t.Fatalf("F16ToF32(%#04x) = %v, want %v", h, f, f16Value(h))
			}
			if back := F32ToF16(f); back != h {
				t.Fatalf("F32ToF16(F16ToF32(%#04x)) = %#04x", h, back)
			}
		}
	}
}

func TestBF16ToF32Exhaustive(t *testing.T) {
	for i := range 1 << 16 {
		h := uint16(i)
		f := BF16ToF32(h)
		if math.Float32bits(f) != uint32(h)<<16 {
			t.Fatalf("BF16ToF32(%#04x) bits %#08x", h, math.Float32bits(f))
		}
		if math.IsNaN(float64(f)) {
			if back := F32ToBF16(f); back&0x7fff <= 0x7f80 || back&0x8000 != h&0x8000 {
				t.Fatalf("F32ToBF16(NaN %#04x) = %#04x, not a NaN of the same sign", h, back)
			}
			continue
		}
		if back := F32ToBF16(f); back != h {
			t.Fatalf("F32ToBF16(BF16ToF32(%#04x)) = %#04x", h, back)
		}
	}
}

// roundingInputs are float32 bit patterns that probe rounding: for every
// adjacent pair of 16-bit values, the exact midpoint and the float32s on
// either side of it, and then random patterns.
func roundingInputs(value func(uint16) float64, inf uint16, random int) []float32 {
	var in []float32
	for h := uint16(0); h < inf; h++ {
		mid := float32((value(h) + value(h+1)) / 2) // exact: 1 more bit than the 16-bit type
		for _, f := range []float32{mid, math.Nextafter32(mid, 0), math.Nextafter32(mid, float32(math.Inf(1)))} {
			in = append(in, f, -f)
		}
	}
	r := rand.New(rand.NewPCG(7, 8))
	for range random {
		in = append(in, math.Float32frombits(r.Uint32()))
	}
	return append(in, float32(math.Inf(1)), float32(math.Inf(-1)), math.MaxFloat32, math.SmallestNonzeroFloat32)
}

func TestF32ToF16Rounding(t *testing.T) {
	for _, f := range roundingInputs(f16Value, 0x7c00, 1<<18) {
		got := F32ToF16(f)
		if math.IsNaN(float64(f)) {
			if got&0x7fff <= 0x7c00 {
				t.Fatalf("F32ToF16(NaN %#08x) = %#04x, not a NaN", math.Float32bits(f), got)
			}
			continue
		}
		if want := nearest(float64(f), f16Value, 0x7c00); got != want {
			t.Fatalf("F32ToF16(%g = %#08x) = %#04x, want %#04x", f, math.Float32bits(f), got, want)
		}
	}
}

func TestF32ToBF16Rounding(t *testing.T) {
	for _, f := range roundingInputs(bf16Value, 0x7f80, 1<<18) {
		got := F32ToBF16(f)
		if math.IsNaN(float64(f)) {
			if got&0x7fff <= 0x7f80 {
				t.Fatalf("F32ToBF16(NaN %#08x) = %#04x, not a NaN", math.Float32bits(f), got)
			}
			continue
		}
		if want := nearest(float64(f), bf16Value, 0x7f80); got != want {
			t.Fatalf("F32ToBF16(%g = %#08x) = %#04x, want %#04x", f, math.Float32bits(f), got, want)
		}
	}
}

func TestBulkConversion(t *testing.T) {
	src := []float32{0, 1, -2.5, 65504, 1e-8, float32(math.Inf(-1)), 3.14159}
	for _, dt := range []DType{DTypeF32, DTypeF16, DTypeBF16} {
		buf := make([]byte, len(src)*dt.Size())
		if err := FromF32(buf, src, dt); err != nil {
			t.Fatal(err)
		}
		got := make([]float32, len(src))
		if err := ToF32(got, buf, dt); err != nil {
			t.Fatal(err)
		}
		for i, f := range src {
			var want float32
			switch dt {
			case DTypeF32:
				want = f
			case DTypeF16:
				want = F16ToF32(F32ToF16(f))
			case DTypeBF16:
				want = BF16ToF32(F32ToBF16(f))
			}
			if got[i] != want {
				t.Fatalf("%v element %d: %v, want %v", dt, i, got[i], want)
			}
		}
		if err := ToF32(got, buf[1:], dt); !errors.Is(err, ErrInvalidArgument) {
			t.Fatalf("%v short src: %v", dt, err)
		}
		if err := FromF32(buf[:len(buf)-1], src, dt); !errors.Is(err, ErrInvalidArgument) {
			t.Fatalf("%v short dst: %v", dt, err)
		}
	}
	if err := ToF32(make([]float32, 1), make([]byte, 1), DTypeInt8); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("int8: %v", err)
	}
	if err := FromF32(make([]byte, 1), make([]float32, 1), DTypeInvalid); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("invalid dtype: %v", err)
	}
}

func TestDTypeNames(t *testing.T) {
	for _, d := range []DType{DTypeF32, DTypeF16, DTypeBF16, DTypeInt8, DTypeU8} {
		got, err := ParseDType(d.String())
		if err != nil || got != d || !d.Valid() {
			t.Fatalf("ParseDType(%q) = %v, %v", d.String(), got, err)
		}
	}
	if _, err := ParseDType("fp8"); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("ParseDType(fp8): %v", err)
	}
	if DTypeInvalid.Valid() || DType(9).Size() != 0 || DTypeInt8.Float() {
		t.Fatal("invalid dtypes look valid")
	}
}
