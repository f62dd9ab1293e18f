package codec

import (
	"encoding/binary"
	"fmt"
	"math"
	"testing"

	"github.com/kvstore/kvstore/format"
)

// checkQuantBound encodes src and checks every decoded element against its
// group's stored parameters: the float32 value v = dequant(code, s, o) is
// within s/2 of the original (up to float32 rounding), and the output is v
// rounded to the dtype to nearest even, bit for bit.
func checkQuantBound(t *testing.T, src []byte, c format.Codec, d Desc, opts Options) []byte {
	t.Helper()
	enc := mustEncode(t, src, c, d, opts)
	out := mustDecode(t, enc, c, d)
	l, err := parseQuant(enc, c, d)
	if err != nil {
		t.Fatal(err)
	}
	want := Options{GroupSize: opts.GroupSize}
	if want.EnsureDefaults(); l.group != want.GroupSize {
		t.Fatalf("group size %d stored, want %d", l.group, want.GroupSize)
	}
	x := make([]float32, d.Elems())
	if err := format.ToF32(x, src, d.DType); err != nil {
		t.Fatal(err)
	}
	size := d.DType.Size()
	for i := range x {
		h, rest := i/(d.Tokens*d.HeadDim), i%(d.Tokens*d.HeadDim)
		tok, ch := rest/d.HeadDim, rest%d.HeadDim
		p := (h*d.Tokens+tok)*l.ngroups + ch/l.group // per token
		if l.axis == axisTokens {
			p = (h*l.ngroups+tok/l.group)*d.HeadDim + ch
		}
		s, o := l.param(enc, l.scalesAt(), p), l.param(enc, l.offsetsAt(), p)
		v := dequant(float32(codeAt(enc[l.dataAt():], i, l.bits)), s, o)
		tol := s/2*(1+1e-6) + 1e-6*(abs(o)+abs(x[i])+l.qmax*s)
		if err := abs(v - x[i]); err > tol {
			t.Fatalf("%v %v element %d (group %d, s=%v o=%v): %v decodes to %v, error %v > %v", c, d, i, p, s, o, x[i], v, err, tol)
		}
		rounded := make([]byte, size)
		_ = format.FromF32(rounded, []float32{v}, d.DType)
		if string(rounded) != string(out[i*size:(i+1)*size]) {
			t.Fatalf("%v %v element %d: output % x, want %v rounded to nearest even (% x)", c, d, i, out[i*size:(i+1)*size], v, rounded)
		}
	}
	return enc
}

// codeAt reads code i of data, one element at a time: the reference the
// row kernels are checked against.
func codeAt(data []byte, i, bits int) uint8 {
	if bits == 8 {
		return data[i]
	}
	return data[i/2] >> (4 * (i % 2)) & 0xf
}

func abs(v float32) float32 { return float32(math.Abs(float64(v))) }

// TestQuantErrorBound covers group sizes (1, odd, larger than the axis),
// parameter dtypes and both axes.
func TestQuantErrorBound(t *testing.T) {
	for _, c := range []format.Codec{format.CodecInt8, format.CodecInt4} {
		for _, g := range []int{1, 7, 32, 64, 1000} {
			for _, sdt := range []format.DType{format.DTypeF16, format.DTypeF32} {
				for _, k := range allKinds {
					d := desc(k, format.DTypeBF16, [3]int{2, 45, 40})
					t.Run(fmt.Sprintf("%v/g%d/%v/%v", c, g, sdt, k), func(t *testing.T) {
						enc := checkQuantBound(t, kvData(d, uint64(g)), c, d, Options{GroupSize: g, ScaleDType: sdt})
						if got := format.DType(enc[1]); got != sdt {
							t.Errorf("parameters stored as %v, asked %v", got, sdt)
						}
					})
				}
			}
		}
	}
}

// TestQuantF32Fallback checks that a chunk whose range f16 parameters cannot
// hold is written with f32 ones, and still within the bound.
func TestQuantF32Fallback(t *testing.T) {
	for _, tc := range []struct {
		name string
		v    []float32
	}{
		{"beyond f16", []float32{1e6, -2e5, 3, 4}},
		{"f16 max", []float32{65504, 0, 1, 2}},               // the rounded-up scale would decode q=max to infinity
		{"tiny offset range", []float32{100, 100.001, 1, 2}}, // fine in f16: scale grows instead
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, c := range []format.Codec{format.CodecInt8, format.CodecInt4} {
				dt := format.DTypeF32
				if tc.name == "f16 max" {
					dt = format.DTypeF16
				}
				d := desc(format.ChunkV, dt, [3]int{1, 1, 4})
				src := make([]byte, d.RawSize())
				_ = format.FromF32(src, tc.v, dt)
				enc := checkQuantBound(t, src, c, d, Options{GroupSize: 2})
				want := format.DTypeF32
				if tc.name == "tiny offset range" {
					want = format.DTypeF16
				}
				if got := format.DType(enc[1]); got != want {
					t.Errorf("%s %v: parameters %v, want %v", tc.name, c, got, want)
				}
			}
		})
	}
}

// TestQuantConstantGroups checks that a group of equal, f16-exact values
// decodes exactly (scale 0).
func TestQuantConstantGroups(t *testing.T) {
	d := desc(format.ChunkK, format.DTypeBF16, [3]int{1, 40, 3})
	src := make([]byte, d.RawSize())
	for i := 0; i < len(src); i += 2 {
		binary.LittleEndian.PutUint16(src[i:], format.F32ToBF16(-1.5))
	}
	for _, c := range []format.Codec{format.CodecInt8, format.CodecInt4} {
		if out := mustDecode(t, mustEncode(t, src, c, d, Options{}), c, d); string(out) != string(src) {
			t.Errorf("%v: constant tensor changed", c)
		}
	}
}

// TestQuantSizes checks the stored size against the layout formula.
func TestQuantSizes(t *testing.T) {
	for _, tc := range []struct {
		c    format.Codec
		d    Desc
		g    int
		want int
	}{
		// Llama-3.1-8B layer, 1000 tokens: keys 8*32*128 params, values 8*1000*4.
		{format.CodecInt4, desc(format.ChunkK, format.DTypeBF16, [3]int{8, 1000, 128}), 32, 8 + 2*2*8*32*128 + 8*1000*128/2},
		{format.CodecInt4, desc(format.ChunkV, format.DTypeBF16, [3]int{8, 1000, 128}), 32, 8 + 2*2*8*1000*4 + 8*1000*128/2},
		{format.CodecInt8, desc(format.ChunkV, format.DTypeF16, [3]int{1, 3, 5}), 2, 8 + 2*2*1*3*3 + 15},
		{format.CodecInt4, desc(format.ChunkK, format.DTypeF32, [3]int{1, 3, 5}), 2, 8 + 2*2*1*2*5 + 8},
	} {
		src := kvData(tc.d, 9)
		enc := mustEncode(t, src, tc.c, tc.d, Options{GroupSize: tc.g})
		if len(enc) != tc.want {
			t.Errorf("%v %v g%d: %d bytes, want %d", tc.c, tc.d, tc.g, len(enc), tc.want)
		}
	}
}

// TestGroupParams checks the parameter rounding at its edges.
func TestGroupParams(t *testing.T) {
	for _, tc := range []struct {
		lo, hi  float32
		sdt, dt format.DType
		ok      bool
	}{
		{-1, 1, format.DTypeF16, format.DTypeBF16, true},
		{0.1, 0.1, format.DTypeF16, format.DTypeF32, true}, // 0.1 is not an f16: scale > 0
		{1e-9, 2e-9, format.DTypeF16, format.DTypeF32, true},
		{-70000, 0, format.DTypeF16, format.DTypeF32, false},
		{0, 65504, format.DTypeF16, format.DTypeF16, false},
		{0, 65504, format.DTypeF32, format.DTypeF16, true},
		{-3e38, 3e38, format.DTypeF32, format.DTypeF32, false},
		{0, 3.3e38, format.DTypeF32, format.DTypeBF16, true},
		{1e-45, 3e-45, format.DTypeF32, format.DTypeF32, true}, // subnormal scale
	} {
		s, o, ok := groupParams(tc.lo, tc.hi, 15, tc.sdt, tc.dt)
		if ok != tc.ok {
			t.Errorf("[%v, %v] %v params for %v: ok %v, want %v", tc.lo, tc.hi, tc.sdt, tc.dt, ok, tc.ok)
			continue
		}
		if !ok {
			continue
		}
		if o > tc.lo || dequant(15, s, o) < tc.hi || !validParams(s, o, 15, tc.dt) {
			t.Errorf("[%v, %v]: s=%v o=%v do not cover the range", tc.lo, tc.hi, s, o)
		}
		if tc.sdt == format.DTypeF16 && (format.F16ToF32(format.F32ToF16(s)) != s || format.F16ToF32(format.F32ToF16(o)) != o) {
			t.Errorf("[%v, %v]: s=%v o=%v not exact in f16", tc.lo, tc.hi, s, o)
		}
	}
}

func TestF16Steps(t *testing.T) {
	for _, tc := range []struct{ h, up, down uint16 }{
		{0x0000, 0x0001, 0x8001}, {0x8000, 0x0001, 0x8001}, {0x3c00, 0x3c01, 0x3bff},
		{0xbc00, 0xbbff, 0xbc01}, {0x7bff, 0x7c00, 0x7bfe}, {0x0001, 0x0002, 0x0000},
	} {
		if got := f16NextUp(tc.h); got != tc.up {
			t.Errorf("f16NextUp(%#x) = %#x, want %#x", tc.h, got, tc.up)
		}
		if got := f16NextDown(tc.h); got != tc.down {
			t.Errorf("f16NextDown(%#x) = %#x, want %#x", tc.h, got, tc.down)
		}
	}
}

// TestFiniteIn checks finiteLimit against the dtype conversions at every
// float32 near the limits.
func TestFiniteIn(t *testing.T) {
	for _, dt := range allDTypes {
		for _, start := range []float32{65400, 3.395e38, math.Float32frombits(0x7f7f0000)} {
			v := start
			for range 1 << 16 {
				for _, x := range []float32{v, -v} {
					b := make([]byte, dt.Size())
					_ = format.FromF32(b, []float32{x}, dt)
					back := make([]float32, 1)
					_ = format.ToF32(back, b, dt)
					if want := !math.IsInf(float64(back[0]), 0); finiteIn(dt, x) != want {
						t.Fatalf("finiteIn(%v, %v) = %v, conversion says %v", dt, x, !want, want)
					}
				}
				v = math.Nextafter32(v, float32(math.Inf(1)))
			}
		}
		if finiteIn(dt, float32(math.NaN())) || finiteIn(dt, float32(math.Inf(-1))) {
			t.Errorf("%v: NaN or -Inf is finite", dt)
		}
	}
}

func TestHalfToF32(t *testing.T) {
	for h := range 1 << 16 {
		got, want := halfToF32(uint16(h)), format.F16ToF32(uint16(h))
		if math.Float32bits(got) != math.Float32bits(want) {
			t.Fatalf("halfToF32(%#04x) = %v, want %v", h, got, want)
		}
	}
}
