package reconstruct

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"
	"unsafe"

	"github.com/kvstore/kvstore/format"
)

// shiftCase is a RoPE shape the shift tests run over: both pairings, SIMD
// widths and odd sizes the SIMD kernels leave to Go, partial rotary.
type shiftCase struct {
	name    string
	cfg     format.RoPE
	headDim int
}

var shiftCases = []shiftCase{
	{"stories-interleaved-8", ropeStories, 8},
	{"llama3.1-half-128", ropeLlama31, 128},
	{"yarn-half-128", ropeYaRN4, 128},
	{"half-12", format.RoPE{Style: format.RoPERotateHalf, Theta: 10000}, 12},
	{"interleaved-partial-64/48", format.RoPE{Style: format.RoPEInterleaved, Theta: 10000, RotaryDims: 48}, 64},
	{"half-partial-80/32", format.RoPE{Style: format.RoPERotateHalf, Theta: 1e6, RotaryDims: 32}, 80},
	{"half-64", format.RoPE{Style: format.RoPERotateHalf, Theta: 10000}, 64},
	{"half-partial-96/64", format.RoPE{Style: format.RoPERotateHalf, Theta: 1e6, RotaryDims: 64}, 96},
}

// shiftWidths runs f with each kernel set the CPU has: the AVX-512 kernels
// rounding with AVX512_BF16, the AVX-512 ones rounding with integer code,
// and the AVX2 ones, so that each is checked.
func shiftWidths(t *testing.T, f func(t *testing.T)) {
	wide, bf16 := shiftAVX512, shiftAVX512BF16
	defer func() { shiftAVX512, shiftAVX512BF16 = wide, bf16 }()
	for _, k := range []struct {
		name       string
		wide, bf16 bool
	}{{"avx512bf16", true, true}, {"avx512", true, false}, {"avx2", false, false}} {
		if k.wide && !wide || k.bf16 && !bf16 {
			t.Logf("no %s kernels on this machine or build", k.name)
			continue
		}
		shiftAVX512, shiftAVX512BF16 = k.wide, k.bf16
		t.Run(k.name, f)
	}
}

var shiftDTypes = []format.DType{format.DTypeF32, format.DTypeF16, format.DTypeBF16}

func shiftEncode(t testing.TB, x []float32, dt format.DType) []byte {
	t.Helper()
	b := make([]byte, len(x)*dt.Size())
	if err := format.FromF32(b, x, dt); err != nil {
		t.Fatal(err)
	}
	return b
}

func shiftDecode(t testing.TB, b []byte, dt format.DType) []float32 {
	t.Helper()
	x := make([]float32, len(b)/dt.Size())
	if err := format.ToF32(x, b, dt); err != nil {
		t.Fatal(err)
	}
	return x
}

// shiftPairNorms returns, for each element, the norm of the rotated pair it is in
// (its own magnitude for pass-through dims).
func shiftPairNorms(r *RoPE, x []float32) []float64 {
	n := make([]float64, len(x))
	hd := r.HeadDim()
	for row := 0; row < len(x)/hd; row++ {
		v := x[row*hd : (row+1)*hd]
		for i := range v {
			n[row*hd+i] = math.Abs(float64(v[i]))
		}
		step, off := shiftPairStep(r.Config().Style, r.Rotary())
		for j := 0; j < r.Rotary()/2; j++ {
			a, b := j*step, j*step+off
			h := math.Hypot(float64(v[a]), float64(v[b]))
			n[row*hd+a], n[row*hd+b] = h, h
		}
	}
	return n
}

// shiftBound is the documented round-trip bound: e*|pair| (+ 2^-24 for f16).
func shiftBound(dt format.DType, norm float64) float64 {
	switch dt {
	case format.DTypeBF16:
		return 1.25 * math.Ldexp(norm, -7)
	case format.DTypeF16:
		return 1.25*math.Ldexp(norm, -10) + math.Ldexp(1, -24)
	}
	return 1e-6 * norm
}

// TestShiftRoundTrip checks the documented bound of Shift(d) then Shift(-d),
// in place and out of place, and that the tolerance is needed at all (a
// rotation really happened).
func TestShiftRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	const heads, tokens = 3, 17
	for _, sc := range shiftCases {
		t.Run(sc.name, func(t *testing.T) {
			r := mustRoPE(t, sc.cfg, sc.headDim)
			for _, dt := range shiftDTypes {
				for _, delta := range []int64{1, 1000, -77, 1 << 20} {
					x := shiftDecode(t, shiftEncode(t, ropeRandVec(rng, heads*tokens*sc.headDim), dt), dt) // representable in dt
					src := shiftEncode(t, x, dt)
					mid := make([]byte, len(src))
					if err := Shift(mid, src, dt, r, heads, tokens, delta); err != nil {
						t.Fatal(err)
					}
					if string(mid) == string(src) {
						t.Fatalf("%s %v delta %d: Shift changed nothing", sc.name, dt, delta)
					}
					if err := Shift(mid, mid, dt, r, heads, tokens, -delta); err != nil {
						t.Fatal(err)
					}
					got, norms := shiftDecode(t, mid, dt), shiftPairNorms(r, x)
					for i := range x {
						if d := math.Abs(float64(got[i] - x[i])); d > shiftBound(dt, norms[i]) {
							t.Fatalf("%s %v delta %d: element %d back as %v, was %v (pair norm %v)",
								sc.name, dt, delta, i, got[i], x[i], norms[i])
						}
					}
				}
			}
		})
	}
}

// TestShiftIsRotate checks that Shift applies to every row exactly the
// rotation Rotate applies for position delta, and that shifting keys rotated
// for positions t lands within the f32 bound of keys rotated for t+delta.
func TestShiftIsRotate(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	const heads, tokens = 2, 9
	for _, sc := range shiftCases {
		t.Run(sc.name, func(t *testing.T) {
			r := mustRoPE(t, sc.cfg, sc.headDim)
			hd := sc.headDim
			pre := ropeRandVec(rng, heads*tokens*hd)
			keys := append([]float32(nil), pre...)
			for row := 0; row < heads*tokens; row++ {
				r.Rotate(keys[row*hd:(row+1)*hd], int64(row%tokens))
			}
			const delta = 4321
			got := make([]float32, len(keys))
			if err := ShiftF32(got, keys, r, heads, tokens, delta); err != nil {
				t.Fatal(err)
			}
			for row := 0; row < heads*tokens; row++ {
				one := append([]float32(nil), keys[row*hd:(row+1)*hd]...)
				r.Rotate(one, delta)
				direct := append([]float32(nil), pre[row*hd:(row+1)*hd]...)
				r.Rotate(direct, int64(row%tokens)+delta)
				norms := shiftPairNorms(r, direct)
				for i := range one {
					if got[row*hd+i] != one[i] {
						t.Fatalf("%s row %d dim %d: Shift %v, Rotate %v", sc.name, row, i, got[row*hd+i], one[i])
					}
					if d := math.Abs(float64(one[i] - direct[i])); d > shiftBound(format.DTypeF32, norms[i]) {
						t.Fatalf("%s row %d dim %d: R(d)R(t)k = %v, R(t+d)k = %v", sc.name, row, i, one[i], direct[i])
					}
				}
			}
		})
	}
}

// TestShiftDTypesAgree checks that Shift on f32 bytes equals ShiftF32 bit
// for bit, and that bf16 and f16 results are the f32 results rounded.
func TestShiftDTypesAgree(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	const heads, tokens = 2, 5
	for _, sc := range shiftCases {
		t.Run(sc.name, func(t *testing.T) {
			r := mustRoPE(t, sc.cfg, sc.headDim)
			for _, dt := range shiftDTypes {
				x := shiftDecode(t, shiftEncode(t, ropeRandVec(rng, heads*tokens*sc.headDim), dt), dt)
				want := make([]float32, len(x))
				if err := ShiftF32(want, x, r, heads, tokens, 99); err != nil {
					t.Fatal(err)
				}
				got := shiftEncode(t, x, dt)
				if err := Shift(got, got, dt, r, heads, tokens, 99); err != nil {
					t.Fatal(err)
				}
				if w := shiftEncode(t, want, dt); string(w) != string(got) {
					t.Errorf("%s %v: Shift differs from ShiftF32 rounded", sc.name, dt)
				}
			}
		})
	}
}

func TestShiftPassThroughAndZero(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	r := mustRoPE(t, format.RoPE{Style: format.RoPERotateHalf, Theta: 10000, RotaryDims: 32}, 80)
	for _, dt := range shiftDTypes {
		src := shiftEncode(t, ropeRandVec(rng, 4*80), dt)
		for _, delta := range []int64{0, 5} {
			dst := make([]byte, len(src))
			if err := Shift(dst, src, dt, r, 2, 2, delta); err != nil {
				t.Fatal(err)
			}
			sz := dt.Size()
			for row := range 4 {
				tail := func(b []byte) string { return string(b[(row*80+32)*sz : (row+1)*80*sz]) }
				if tail(dst) != tail(src) {
					t.Fatalf("%v delta %d row %d: pass-through dims not copied", dt, delta, row)
				}
			}
			if (string(dst) == string(src)) != (delta == 0) {
				t.Fatalf("%v delta %d: dst == src is %v", dt, delta, string(dst) == string(src))
			}
		}
	}
}

func TestShiftRejects(t *testing.T) {
	r := mustRoPE(t, ropeStories, 8)
	buf := make([]byte, 2*3*8*2)
	f := make([]float32, 2*3*8)
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"int8", Shift(buf, buf, format.DTypeInt8, r, 2, 3, 1)},
		{"nil rope", Shift(buf, buf, format.DTypeBF16, nil, 2, 3, 1)},
		{"short src", Shift(buf, buf[:10], format.DTypeBF16, r, 2, 3, 1)},
		{"long dst", Shift(append(buf, 0, 0), buf, format.DTypeBF16, r, 2, 3, 1)},
		{"f32 size", Shift(buf, buf, format.DTypeF32, r, 2, 3, 1)},
		{"negative", Shift(buf, buf, format.DTypeBF16, r, -2, -3, 1)},
		{"overflow", Shift(buf, buf, format.DTypeBF16, r, math.MaxInt/2, math.MaxInt/2, 1)},
		{"f32 nil rope", ShiftF32(f, f, nil, 2, 3, 1)},
		{"f32 short", ShiftF32(f[:5], f, r, 2, 3, 1)},
		{"f32 overlap", ShiftF32(f[1:], f[:len(f)-1], r, 2, 3, 1)},
	} {
		if !errors.Is(tc.err, format.ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument", tc.name, tc.err)
		}
	}
	one := make([]byte, 200)
	if err := Shift(one[2:98], one[0:96], format.DTypeBF16, r, 2, 3, 1); !errors.Is(err, format.ErrInvalidArgument) {
		t.Errorf("overlapping bf16: %v", err)
	}
	if err := Shift(nil, nil, format.DTypeBF16, r, 0, 5, 1); err != nil {
		t.Errorf("empty shift: %v", err)
	}
}

// TestShiftSIMDMatchesGo runs the SIMD kernels and the portable ones on the
// same inputs, random bit patterns included (subnormals, infinities, NaN),
// and requires identical bits (any NaN matching any NaN).
func TestShiftSIMDMatchesGo(t *testing.T) {
	if !shiftAVX2 {
		t.Skip("no SIMD kernel on this machine or build (amd64 with AVX2, without purego)")
	}
	shiftWidths(t, testShiftSIMDMatchesGo)
}

func testShiftSIMDMatchesGo(t *testing.T) {
	wide := 0
	rng := rand.New(rand.NewPCG(15, 16))
	const heads, tokens = 3, 11
	ran := 0
	for _, sc := range shiftCases {
		r := mustRoPE(t, sc.cfg, sc.headDim)
		n := heads * tokens * sc.headDim
		for _, dt := range shiftDTypes {
			for _, delta := range []int64{1, -5, 123457} {
				src := make([]byte, n*dt.Size())
				for i := range src {
					src[i] = byte(rng.Uint32())
				}
				if dt != format.DTypeF32 { // ordinary values, tiny ones (subnormal results), then raw bits
					v := ropeRandVec(rng, n/2)
					for i := n / 4; i < n/2; i++ {
						v[i] *= 0x1p-125
					}
					copy(src, shiftEncode(t, v, dt))
				}
				c, s := r.shiftTable(delta)
				fast := make([]byte, len(src))
				if !shiftRowsFast(unsafe.Pointer(&fast[0]), unsafe.Pointer(&src[0]), dt, heads*tokens, r, c, s) {
					continue
				}
				ran++
				if shiftWide(r, dt) {
					wide++
				}
				slow := make([]byte, len(src))
				switch dt {
				case format.DTypeF32:
					shiftRowsF32Bytes(slow, src, heads*tokens, r.headDim, r.rot, r.cfg.Style, c, s)
				case format.DTypeBF16:
					shiftRowsBF16(slow, src, heads*tokens, r.headDim, r.rot, r.cfg.Style, c, s)
				case format.DTypeF16:
					shiftRowsF16(slow, src, heads*tokens, r.headDim, r.rot, r.cfg.Style, c, s)
				}
				a, b := shiftDecode(t, fast, dt), shiftDecode(t, slow, dt)
				for i := range a {
					if math.Float32bits(a[i]) != math.Float32bits(b[i]) && !(a[i] != a[i] && b[i] != b[i]) {
						t.Fatalf("%s %v delta %d element %d: SIMD %v (%#x), Go %v (%#x)",
							sc.name, dt, delta, i, a[i], math.Float32bits(a[i]), b[i], math.Float32bits(b[i]))
					}
				}
			}
		}
	}
	if ran == 0 {
		t.Fatal("no shape took the SIMD path")
	}
	if (wide > 0) != shiftAVX512 {
		t.Fatalf("%d shapes took the AVX-512 kernel with it switched %v", wide, shiftAVX512)
	}
}

// BenchmarkShift shifts the bf16 keys of one Llama-3.1-8B layer (8 KV heads
// x 1000 tokens x 128 dims, 2 MB) in place, and reports its bandwidth as a
// fraction of a memcpy of the same bytes (x-memcpy).
func BenchmarkShift(b *testing.B) {
	const heads, tokens, hd = 8, 1000, 128
	r := mustRoPE(b, ropeLlama31, hd)
	rng := rand.New(rand.NewPCG(17, 18))
	for _, dt := range shiftDTypes {
		buf := shiftEncode(b, ropeRandVec(rng, heads*tokens*hd), dt)
		run := func(b *testing.B, shift func(delta int64)) {
			b.ReportAllocs()
			b.SetBytes(int64(len(buf)))
			for i := 0; b.Loop(); i++ {
				shift(int64(i%2*2 - 1)) // +1, -1: keeps values bounded
			}
			b.ReportMetric(shiftMemcpyTime(len(buf))/(float64(b.Elapsed())/float64(b.N)), "x-memcpy")
		}
		b.Run(dt.String(), func(b *testing.B) {
			run(b, func(d int64) {
				if err := Shift(buf, buf, dt, r, heads, tokens, d); err != nil {
					b.Fatal(err)
				}
			})
		})
		b.Run(dt.String()+"-go", func(b *testing.B) {
			run(b, func(d int64) {
				c, s := r.shiftTable(d)
				switch dt {
				case format.DTypeF32:
					shiftRowsF32Bytes(buf, buf, heads*tokens, hd, hd, r.cfg.Style, c, s)
				case format.DTypeBF16:
					shiftRowsBF16(buf, buf, heads*tokens, hd, hd, r.cfg.Style, c, s)
				case format.DTypeF16:
					shiftRowsF16(buf, buf, heads*tokens, hd, hd, r.cfg.Style, c, s)
				}
			})
		})
	}
	b.Run("memcpy", func(b *testing.B) {
		src, dst := shiftCopyBuffers(heads * tokens * hd * 2)
		b.SetBytes(int64(len(src)))
		for b.Loop() {
			copy(dst, src)
		}
	})
}

// BenchmarkShiftKernels is BenchmarkShift's bf16 case with each kernel set
// the CPU has switched in turn (AVX512_BF16 rounding, integer AVX-512,
// AVX2), so that their speeds are read side by side in one run:
//
//	go test -run '^$' -bench ShiftKernels -count 3 -cpu 1 ./reconstruct
func BenchmarkShiftKernels(b *testing.B) {
	wide, bf16 := shiftAVX512, shiftAVX512BF16
	defer func() { shiftAVX512, shiftAVX512BF16 = wide, bf16 }()
	const heads, tokens, hd = 8, 1000, 128
	r := mustRoPE(b, ropeLlama31, hd)
	buf := shiftEncode(b, ropeRandVec(rand.New(rand.NewPCG(17, 18)), heads*tokens*hd), format.DTypeBF16)
	for _, k := range []struct {
		name       string
		wide, bf16 bool
	}{{"avx512bf16", true, true}, {"avx512", true, false}, {"avx2", false, false}} {
		if k.wide && !wide || k.bf16 && !bf16 {
			continue // not on this CPU: nothing to measure
		}
		shiftAVX512, shiftAVX512BF16 = k.wide, k.bf16
		b.Run(k.name, func(b *testing.B) {
			sh, err := NewShifter(r, 1) // built with this kernel set
			if err != nil {
				b.Fatal(err)
			}
			back, err := NewShifter(r, -1)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(buf)))
			for i := 0; b.Loop(); i++ {
				s := sh
				if i%2 == 1 {
					s = back // +1, -1: keeps values bounded
				}
				if err := s.Shift(buf, buf, format.DTypeBF16, heads, tokens); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(shiftMemcpyTime(len(buf))/(float64(b.Elapsed())/float64(b.N)), "x-memcpy")
		})
	}
}

// shiftCopyBuffers returns two n-byte buffers with every page written (a
// fresh allocation may map the shared zero page, which copies too fast).
func shiftCopyBuffers(n int) (src, dst []byte) {
	src, dst = make([]byte, n), make([]byte, n)
	for i := range src {
		src[i], dst[i] = byte(i), byte(i>>8)
	}
	return src, dst
}

// shiftMemcpyTime is the best of a few timings of one n-byte copy, in ns.
func shiftMemcpyTime(n int) float64 {
	src, dst := shiftCopyBuffers(n)
	best := math.Inf(1)
	for range 5 {
		const reps = 50
		start := time.Now()
		for range reps {
			copy(dst, src)
		}
		best = min(best, float64(time.Since(start))/reps)
	}
	return best
}

func ExampleShift() {
	r, _ := NewRoPE(format.RoPE{Style: format.RoPERotateHalf, Theta: 10000}, 4)
	k := []float32{1, 0, 0, 0} // one head, one token, rotated for position 0
	_ = ShiftF32(k, k, r, 1, 1, 1)
	fmt.Printf("%.4f\n", k) // now rotated for position 1
	// Output: [0.5403 0.0000 0.8415 0.0000]
}

// TestShifterMatchesShift checks that a Shifter, its table built once and
// reused, gives the bits of Shift and ShiftF32 for every case and dtype,
// in place and out of place.
func TestShifterMatchesShift(t *testing.T) {
	rng := rand.New(rand.NewPCG(19, 20))
	const heads, tokens = 2, 5
	for _, sc := range shiftCases {
		t.Run(sc.name, func(t *testing.T) {
			r := mustRoPE(t, sc.cfg, sc.headDim)
			n := heads * tokens * sc.headDim
			for _, delta := range []int64{0, 3, -77} {
				sh, err := NewShifter(r, delta)
				if err != nil {
					t.Fatal(err)
				}
				for _, dt := range shiftDTypes {
					src := shiftEncode(t, ropeRandVec(rng, n), dt)
					want, got := make([]byte, len(src)), make([]byte, len(src))
					if err := Shift(want, src, dt, r, heads, tokens, delta); err != nil {
						t.Fatal(err)
					}
					if err := sh.Shift(got, src, dt, heads, tokens); err != nil {
						t.Fatal(err)
					}
					if !bytes.Equal(got, want) {
						t.Fatalf("%s %v delta %d: Shifter differs from Shift out of place", sc.name, dt, delta)
					}
					if err := sh.Shift(src, src, dt, heads, tokens); err != nil || !bytes.Equal(src, want) {
						t.Fatalf("%s %v delta %d: Shifter in place differs from Shift (err %v)", sc.name, dt, delta, err)
					}
				}
				x := ropeRandVec(rng, n)
				want, got := make([]float32, n), make([]float32, n)
				if err := ShiftF32(want, x, r, heads, tokens, delta); err != nil {
					t.Fatal(err)
				}
				if err := sh.ShiftF32(got, x, heads, tokens); err != nil {
					t.Fatal(err)
				}
				for i := range want {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Fatalf("%s delta %d element %d: Shifter.ShiftF32 %v, ShiftF32 %v", sc.name, delta, i, got[i], want[i])
					}
				}
			}
		})
	}
	if _, err := NewShifter(nil, 1); !errors.Is(err, format.ErrInvalidArgument) {
		t.Fatalf("NewShifter(nil): %v, want ErrInvalidArgument", err)
	}
}
