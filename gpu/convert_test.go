package gpu

import (
	"bytes"
	"encoding/binary"
	"math"
	"testing"

	"github.com/kvstore/kvstore/format"
)

// specialF32 are float32 bit patterns at the edges of rounding to f16 and
// bf16: ties of both parities, subnormals, overflow, infinities, NaNs.
var specialF32 = []uint32{
	0x00000000, 0x80000000, 0x3f800000, 0xbf800000, // ±0, ±1
	0x477fe000, 0x477fefff, 0x477ff000, 0x4e6e6b28, 0xce6e6b28, // f16 max, just below and at the overflow tie, ±1e9
	0x7f800000, 0xff800000, 0x7fc00001, 0x7f800001, 0xffc12345, // ±Inf, quiet, signalling, negative NaN
	0x33800000, 0x33000000, 0x33400000, 0x33c00000, 0x387fc000, 0x38800000, 0x387fffff, // f16 subnormal range and ties
	0x3f801000, 0x3f803000, 0xbf801000, 0x3f800fff, 0x3f801001, // f16 ties near 1: even, odd, negative, below, above
	0x3f808000, 0x3f818000, 0xbf818000, 0x3f807fff, 0x3f808001, // bf16 ties near 1
	0x00000001, 0x807fffff, 0x7f7fffff, 0xff7fffff, // f32 subnormal and max
}

// specialHalf are 16-bit patterns read as f16 or bf16 sources.
var specialHalf = []uint16{0x0000, 0x8000, 0x0001, 0x03ff, 0x0400, 0x7bff, 0x7c00, 0xfc00, 0x7e01, 0xfd55, 0x3c00, 0x8001, 0x7f80, 0x7fc1}

// checkConvert moves special values through the shift kernel without a
// rotation (a pure convert and scatter) and compares every output bit with
// package format's conversions.
func checkConvert(t *testing.T, dev Device) {
	s, err := dev.NewStream()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	run := func(name string, src []byte, srcDT, outDT format.DType, n int, want []byte) {
		t.Helper()
		lay := Layout{Kind: LayoutHND, DType: outDT, Heads: 1, HeadDim: n, Tokens: 1}
		l := ShiftLaunch{Layout: lay, Dst: upload(t, dev, s, filled(lay.Bytes(), sentinel)), Src: upload(t, dev, s, src), SrcDType: srcDT, Tokens: 1}
		if err := s.Shift(&l); err != nil {
			t.Fatal(err)
		}
		got := download(t, s, l.Dst)
		if !bytes.Equal(got, want) {
			t.Errorf("%s: %s", name, firstDiff(&lay, got, want))
		}
	}
	f32 := make([]byte, 4*len(specialF32))
	vals := make([]float32, len(specialF32))
	for i, b := range specialF32 {
		binary.LittleEndian.PutUint32(f32[4*i:], b)
		vals[i] = math.Float32frombits(b)
	}
	for _, out := range []format.DType{format.DTypeF16, format.DTypeBF16, format.DTypeF32} {
		want := make([]byte, len(vals)*out.Size())
		format.FromF32(want, vals, out)
		run("f32->"+out.String(), f32, format.DTypeF32, out, len(vals), want)
	}
	half := make([]byte, 2*len(specialHalf))
	for i, h := range specialHalf {
		binary.LittleEndian.PutUint16(half[2*i:], h)
	}
	for _, src := range []format.DType{format.DTypeF16, format.DTypeBF16} {
		want := make([]byte, 4*len(specialHalf))
		for i, h := range specialHalf {
			v := format.F16ToF32(h)
			if src == format.DTypeBF16 {
				v = format.BF16ToF32(h)
			}
			binary.LittleEndian.PutUint32(want[4*i:], math.Float32bits(v))
		}
		run(src.String()+"->f32", half, src, format.DTypeF32, len(specialHalf), want)
		// Same dtype: the bits come back, except that signalling NaNs
		// come out quiet, as format's conversions make them.
		same := make([]byte, len(half))
		wide := make([]float32, len(specialHalf))
		format.ToF32(wide, half, src)
		format.FromF32(same, wide, src)
		run(src.String()+"->"+src.String(), half, src, src, len(specialHalf), same)
	}
}

func TestConvertSpecialValues(t *testing.T)             { checkConvert(t, CPU()) }
func TestEmulatedCUDAConvertSpecialValues(t *testing.T) { checkConvert(t, emuDevice(t)) }
func TestCUDAConvertSpecialValues(t *testing.T)         { checkConvert(t, openCUDA(t)) }
