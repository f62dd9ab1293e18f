package codec

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/reconstruct"
)

// Test RoPE configurations: every style, partial rotary and every scaling.
var (
	ropeHalf        = format.RoPE{Style: format.RoPERotateHalf, Theta: 10000}
	ropeInterleaved = format.RoPE{Style: format.RoPEInterleaved, Theta: 10000}
	ropePartial     = format.RoPE{Style: format.RoPERotateHalf, RotaryDims: 16, Theta: 10000}
	ropeLlama3      = format.RoPE{Style: format.RoPERotateHalf, Theta: 500000, Scaling: format.RoPEScalingLlama3,
		Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OriginalMaxPos: 8192}
	ropeYaRN = format.RoPE{Style: format.RoPEInterleaved, Theta: 10000, Scaling: format.RoPEScalingYaRN,
		Factor: 4, OriginalMaxPos: 4096, BetaFast: 32, BetaSlow: 1}
)

// lowRankData returns a chunk of d whose heads (pre-RoPE for K) are of rank
// r plus Gaussian noise of relative size noise, component i scaled by
// 2^-i; K rows are then rope.Apply'd at positions 0..tokens-1, as a model
// stores keys. It also returns the tensor in float32 before rounding.
func lowRankData(t testing.TB, d Desc, r int, rope *format.RoPE, noise float64, seed uint64) ([]byte, []float32) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 11))
	f := make([]float32, d.Elems())
	u, v := make([]float64, d.Tokens*r), make([]float64, r*d.HeadDim)
	var rr *reconstruct.RoPE
	if rope != nil && d.Kind == format.ChunkK {
		var err error
		if rr, err = reconstruct.NewRoPE(*rope, d.HeadDim); err != nil {
			t.Fatal(err)
		}
	}
	for h := range d.Heads {
		for i := range u {
			u[i] = rng.NormFloat64()
		}
		for i := range v {
			v[i] = rng.NormFloat64() * math.Ldexp(3, -(i/d.HeadDim))
		}
		for tok := range d.Tokens {
			row := f[(h*d.Tokens+tok)*d.HeadDim : (h*d.Tokens+tok+1)*d.HeadDim]
			for j := range row {
				var s float64
				for i := range r {
					s += u[tok*r+i] * v[i*d.HeadDim+j]
				}
				row[j] = float32(s + noise*3*rng.NormFloat64())
			}
			if rr != nil {
				rr.Apply(row, int64(tok))
			}
		}
	}
	b := make([]byte, d.RawSize())
	if err := format.FromF32(b, f, d.DType); err != nil {
		t.Fatal(err)
	}
	return b, f
}

// relErr is ||got - want||_F / ||want||_F, got in dtype dt.
func relErr(t testing.TB, got []byte, dt format.DType, want []float32) float64 {
	t.Helper()
	g := make([]float32, len(want))
	if err := format.ToF32(g, got, dt); err != nil {
		t.Fatal(err)
	}
	var num, den float64
	for i, w := range want {
		e := float64(g[i]) - float64(w)
		num += e * e
		den += float64(w) * float64(w)
	}
	return math.Sqrt(num / den)
}

// eps is the unit roundoff of dt.
func eps(dt format.DType) float64 {
	switch dt {
	case format.DTypeBF16:
		return 0x1p-8
	case format.DTypeF16:
		return 0x1p-11
	}
	return 0x1p-24
}

// TestLowRankExact round-trips chunks of exactly rank 3 in every dtype,
// kind, RoPE and factor dtype: by fixed rank and by energy, the chunk holds
// rank 3 and decodes within the rounding of the data and the factors.
func TestLowRankExact(t *testing.T) {
	const r = 3
	for _, dt := range allDTypes {
		for _, fdt := range allDTypes {
			for _, rope := range []*format.RoPE{nil, &ropeHalf, &ropeInterleaved, &ropePartial, &ropeLlama3, &ropeYaRN} {
				kind := format.ChunkK
				if rope == nil {
					kind = format.ChunkV
				}
				d := desc(kind, dt, [3]int{2, 40, 24})
				src, _ := lowRankData(t, d, r, rope, 0, 1)
				want := make([]float32, d.Elems())
				if err := format.ToF32(want, src, dt); err != nil {
					t.Fatal(err)
				}
				for _, o := range []Options{{Rank: r}, {Energy: 0.9999}, {Rank: 20}} {
					o.RoPE, o.FactorDType = rope, fdt
					name := fmt.Sprintf("%v/factors %v/rope %v/rank %d", d, fdt, rope != nil, o.Rank)
					enc := mustEncode(t, src, format.CodecLowRank, d, o)
					for h := range d.Heads {
						// Rank 20 keeps components of the data's rounding too.
						if got := lowRankRank(enc, h); got != r && o.Rank != 20 {
							t.Errorf("%s: head %d has rank %d, want %d", name, h, got, r)
						}
					}
					tol := 2*eps(dt) + 8*eps(fdt) + 1e-5
					if e := relErr(t, mustDecode(t, enc, format.CodecLowRank, d), dt, want); e > tol {
						t.Errorf("%s: relative error %.3g > %.3g", name, e, tol)
					}
				}
			}
		}
	}
}

// TestLowRankPreRoPE factors keys of pre-RoPE rank 4 (plus 1% noise) under
// every RoPE: factoring them pre-RoPE, as the codec does, must be several
// times more accurate at rank 4 than factoring the stored post-RoPE rows
// (the same bytes encoded as a V chunk, which is not un-rotated).
func TestLowRankPreRoPE(t *testing.T) {
	for _, rope := range []format.RoPE{ropeHalf, ropeInterleaved, ropePartial, ropeLlama3, ropeYaRN} {
		d := desc(format.ChunkK, format.DTypeBF16, [3]int{2, 64, 32})
		src, want := lowRankData(t, d, 4, &rope, 0.01, 2)
		o := Options{Rank: 4, RoPE: &rope}
		pre := relErr(t, mustDecode(t, mustEncode(t, src, format.CodecLowRank, d, o), format.CodecLowRank, d), d.DType, want)
		v := d
		v.Kind = format.ChunkV
		post := relErr(t, mustDecode(t, mustEncode(t, src, format.CodecLowRank, v, o), format.CodecLowRank, v), d.DType, want)
		t.Logf("%v %v rotary %d: rank-4 relative error pre-RoPE %.4f, post-RoPE %.4f", rope.Style, rope.Scaling, rope.RotaryDims, pre, post)
		if !(pre < 0.03 && 5*pre < post) {
			t.Errorf("%v %v rotary %d: pre-RoPE error %.4f, post-RoPE %.4f; want < 0.03 and 5x better", rope.Style, rope.Scaling, rope.RotaryDims, pre, post)
		}
	}
}

// TestLowRankKVData runs KV-like data of every dtype, kind and test shape:
// at full rank the chunk decodes within rounding, at rank 2 (or 0.5 of the
// energy) it decodes to something less accurate but finite; Bound holds
// (mustEncode) and encoding is deterministic.
func TestLowRankKVData(t *testing.T) {
	for _, dt := range allDTypes {
		for _, k := range allKinds {
			for _, s := range shapes[:8] {
				d := desc(k, dt, s)
				if k == format.ChunkK && s[2] == 1 {
					continue // no RoPE rotates a single dimension
				}
				src := kvData(d, uint64(s[0]*s[1]*s[2]))
				want := make([]float32, d.Elems())
				if err := format.ToF32(want, src, dt); err != nil {
					t.Fatal(err)
				}
				full := Options{Rank: min(s[1], s[2]), RoPE: ropeFor(ropeHalf, s[2]), FactorDType: format.DTypeF32}
				if e := relErr(t, mustDecode(t, mustEncode(t, src, format.CodecLowRank, d, full), format.CodecLowRank, d), dt, want); e > 2*eps(dt)+1e-5 {
					t.Errorf("%v full rank: relative error %.3g", d, e)
				}
				for _, o := range []Options{{Rank: 2, RoPE: ropeFor(ropeLlama3, s[2])}, {Energy: 0.5, RoPE: ropeFor(ropeInterleaved, s[2])}} {
					enc := mustEncode(t, src, format.CodecLowRank, d, o)
					if again := mustEncode(t, src, format.CodecLowRank, d, o); !bytes.Equal(enc, again) {
						t.Fatalf("%v: encoding twice gave other bytes", d)
					}
					if e := relErr(t, mustDecode(t, enc, format.CodecLowRank, d), dt, want); !(e < 1) {
						t.Errorf("%v %+v: relative error %v", d, o, e)
					}
				}
			}
		}
	}
}

// TestLowRankF16Fallback checks that singular values beyond f16 make the
// chunk's factors f32, and that it still decodes.
func TestLowRankF16Fallback(t *testing.T) {
	d := desc(format.ChunkV, format.DTypeF32, [3]int{1, 64, 64})
	src, want := lowRankData(t, d, 2, nil, 0, 3)
	for i := range want {
		want[i] *= 1000
	}
	if err := format.FromF32(src, want, d.DType); err != nil {
		t.Fatal(err)
	}
	enc := mustEncode(t, src, format.CodecLowRank, d, Options{Rank: 2})
	if fdt := format.DType(enc[0]); fdt != format.DTypeF32 {
		t.Fatalf("factor dtype %v, want f32", fdt)
	}
	if e := relErr(t, mustDecode(t, enc, format.CodecLowRank, d), d.DType, want); e > 1e-5 {
		t.Errorf("relative error %v", e)
	}
}

// TestLowRankArguments checks the encoder's refusals: ErrInvalidArgument,
// dst unchanged.
func TestLowRankArguments(t *testing.T) {
	k := desc(format.ChunkK, format.DTypeF16, [3]int{1, 4, 8})
	src := kvData(k, 1)
	big := make([]float32, k.Elems())
	big[0], big[1] = 40000, 40000 // a row of norm 56569 > 65520/2
	bigSrc := make([]byte, k.RawSize())
	if err := format.FromF32(bigSrc, big, k.DType); err != nil {
		t.Fatal(err)
	}
	odd := ropeHalf
	odd.RotaryDims = 3
	for _, tc := range []struct {
		name string
		opts Options
		src  []byte
	}{
		{"K without RoPE", Options{}, src},
		{"bad RoPE", Options{RoPE: &odd}, src},
		{"negative rank", Options{Rank: -1, RoPE: &ropeHalf}, src},
		{"rank too big", Options{Rank: RankLimit + 1, RoPE: &ropeHalf}, src},
		{"max rank < 0", Options{MaxRank: -1, RoPE: &ropeHalf}, src},
		{"max rank big", Options{MaxRank: RankLimit + 1, RoPE: &ropeHalf}, src},
		{"energy > 1", Options{Energy: 1.5, RoPE: &ropeHalf}, src},
		{"energy < 0", Options{Energy: -0.1, RoPE: &ropeHalf}, src},
		{"energy NaN", Options{Energy: math.NaN(), RoPE: &ropeHalf}, src},
		{"factor int8", Options{FactorDType: format.DTypeInt8, RoPE: &ropeHalf}, src},
		{"nan", Options{RoPE: &ropeHalf}, withElem(src, k.DType, 5, float32(math.NaN()))},
		{"inf", Options{RoPE: &ropeHalf}, withElem(src, k.DType, 0, float32(math.Inf(1)))},
		{"row too long", Options{RoPE: &ropeHalf}, bigSrc},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Encode([]byte("keep"), tc.src, format.CodecLowRank, k, tc.opts)
			if !errors.Is(err, format.ErrInvalidArgument) || string(got) != "keep" {
				t.Errorf("%s: Encode = %q, %v; want dst unchanged and ErrInvalidArgument", tc.name, got, err)
			}
		})
	}
}

// TestLowRankTruncated cuts small chunks at every length and extends them by
// a byte; flips every bit of the header and ranks. Nothing panics, errors
// are ErrCorruption, and every cut or extended chunk is refused.
func TestLowRankTruncated(t *testing.T) {
	for _, dt := range allDTypes {
		for _, k := range allKinds {
			for _, s := range smallShapes {
				d := desc(k, dt, s)
				enc := mustEncode(t, kvData(d, 1), format.CodecLowRank, d, Options{Rank: 2, RoPE: ropeFor(ropeLlama3, s[2])})
				for n := range len(enc) {
					if err := decodeErr(t, enc[:n], format.CodecLowRank, d); err == nil {
						t.Fatalf("%v: %d of %d bytes decoded", d, n, len(enc))
					}
				}
				if err := decodeErr(t, append(enc, 0), format.CodecLowRank, d); err == nil {
					t.Fatalf("%v: a trailing byte decoded", d)
				}
				for i := range (lowRankHeader + 2*d.Heads + reconstruct.FactorHeaderSize) * 8 {
					b := bytes.Clone(enc)
					b[i/8] ^= 1 << (i % 8)
					decodeErr(t, b, format.CodecLowRank, d)
				}
			}
		}
	}
}

// TestLowRankHostile feeds hand-broken chunks: each must be ErrCorruption.
func TestLowRankHostile(t *testing.T) {
	kd := desc(format.ChunkK, format.DTypeF16, [3]int{2, 6, 8})
	vd := kd
	vd.Kind = format.ChunkV
	k := mustEncode(t, kvData(kd, 1), format.CodecLowRank, kd, Options{Rank: 2, RoPE: &ropeHalf})
	v := mustEncode(t, kvData(vd, 1), format.CodecLowRank, vd, Options{Rank: 2})
	for _, good := range []struct {
		b []byte
		d Desc
	}{{k, kd}, {v, vd}} {
		t.Run(good.d.Kind.String(), func(t *testing.T) {
			if err := decodeErr(t, good.b, format.CodecLowRank, good.d); err != nil {
				t.Fatalf("good %v chunk: %v", good.d.Kind, err)
			}
		})
	}
	at := func(b []byte, h int) int { // head h's factor encoding
		off := lowRankHeader + 2*kd.Heads
		for i := range h {
			off += lowRankFactorLayout(kd, lowRankRank(b, i), format.DType(b[0])).Size()
		}
		return off
	}
	edit := func(b []byte, f func(b []byte)) []byte { b = bytes.Clone(b); f(b); return b }
	s0 := func(b []byte) int { return at(b, 0) + lowRankFactorLayout(kd, 2, format.DTypeF16).SOffset() }
	for _, tc := range []struct {
		name string
		b    []byte
		d    Desc
	}{
		{"K chunk as V", k, vd},
		{"V chunk as K", v, kd},
		{"factor dtype int8", edit(k, func(b []byte) { b[0] = byte(format.DTypeInt8) }), kd},
		{"factor dtype 0", edit(k, func(b []byte) { b[0] = 0 }), kd},
		{"reserved byte 3", edit(k, func(b []byte) { b[3] = 1 }), kd},
		{"style 3", edit(k, func(b []byte) { b[1] = 3 }), kd},
		{"theta 0", edit(k, func(b []byte) { clear(b[8:16]) }), kd},
		{"theta NaN", edit(k, func(b []byte) { binary.LittleEndian.PutUint64(b[8:], math.Float64bits(math.NaN())) }), kd},
		{"odd rotary dims", edit(k, func(b []byte) { b[4] = 3 }), kd},
		{"RoPE bytes on V", edit(v, func(b []byte) { b[20] = 1 }), vd},
		{"rank > head dim", edit(k, func(b []byte) { binary.LittleEndian.PutUint16(b[lowRankHeader:], 9) }), kd},
		{"rank 65535", edit(k, func(b []byte) { binary.LittleEndian.PutUint16(b[lowRankHeader:], math.MaxUint16) }), kd},
		{"ranks swapped size", edit(k, func(b []byte) { binary.LittleEndian.PutUint16(b[lowRankHeader:], 1) }), kd},
		{"descriptor rank", edit(k, func(b []byte) { binary.LittleEndian.PutUint16(b[at(b, 1)+10:], 1) }), kd},
		{"descriptor rows", edit(k, func(b []byte) { binary.LittleEndian.PutUint32(b[at(b, 0)+4:], 7) }), kd},
		{"descriptor dtype", edit(k, func(b []byte) { b[at(b, 0)+12] = byte(format.DTypeBF16) }), kd},
		{"descriptor magic", edit(k, func(b []byte) { b[at(b, 1)] = 'X' }), kd},
		{"negative S", edit(k, func(b []byte) { b[s0(b)+1] |= 0x80 }), kd},
		{"NaN S", edit(k, func(b []byte) { binary.LittleEndian.PutUint16(b[s0(b):], 0x7e00) }), kd},
		{"huge product", edit(k, hugeHead0), kd},
		{"NaN U", edit(k, func(b []byte) { binary.LittleEndian.PutUint16(b[at(b, 1)+reconstruct.FactorHeaderSize:], 0x7e00) }), kd},
		{"Inf Vt", edit(k, func(b []byte) { binary.LittleEndian.PutUint16(b[len(b)-2:], 0x7c00) }), kd},
		{"header only", k[:lowRankHeader], kd},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := decodeErr(t, tc.b, format.CodecLowRank, tc.d); err == nil {
				t.Errorf("%s: decoded", tc.name)
			}
		})
	}
}

// hugeHead0 sets head 0's U and Vt to ones and S to 65504 (rank 2 of a
// [2 6 8] f16 K chunk): finite factors whose product overflows f16.
func hugeHead0(b []byte) {
	l := lowRankFactorLayout(desc(format.ChunkK, format.DTypeF16, [3]int{2, 6, 8}), 2, format.DTypeF16)
	f := b[lowRankHeader+4:]
	for i := l.UOffset(); i < l.Size(); i += 2 {
		binary.LittleEndian.PutUint16(f[i:], 0x3c00)
	}
	for i := l.SOffset(); i < l.VtOffset(); i += 2 {
		binary.LittleEndian.PutUint16(f[i:], 0x7bff)
	}
}

// ropeFor returns base for heads of dim dims, its rotary dims made even
// when dims is odd.
func ropeFor(base format.RoPE, dims int) *format.RoPE {
	if dims%2 == 1 {
		base.RotaryDims = dims - 1
	}
	return &base
}

// TestLowRankBound checks Bound against the largest chunks: full rank with
// f16 factors falling back to f32, fixed ranks above the shape.
func TestLowRankBound(t *testing.T) {
	d := desc(format.ChunkV, format.DTypeF32, [3]int{2, 5, 7})
	src, want := lowRankData(t, d, 5, nil, 0, 4)
	for i := range want {
		want[i] *= 30000 // singular values beyond f16
	}
	if err := format.FromF32(src, want, d.DType); err != nil {
		t.Fatal(err)
	}
	for _, o := range []Options{{Rank: 100}, {Energy: 1}, {Rank: 3, FactorDType: format.DTypeBF16}, {Energy: 1, MaxRank: 2}} {
		enc := mustEncode(t, src, format.CodecLowRank, d, o)
		bound, err := Bound(format.CodecLowRank, d, o)
		if err != nil || len(enc) > bound {
			t.Errorf("%+v: %d bytes, Bound %d, %v", o, len(enc), bound, err)
		}
		if o.Rank == 100 && len(enc) != bound {
			t.Errorf("full rank with f32 fallback: %d bytes, Bound %d: want it exact", len(enc), bound)
		}
	}
	if _, err := Bound(format.CodecLowRank, d, Options{Rank: -1}); !errors.Is(err, format.ErrInvalidArgument) {
		t.Errorf("Bound of rank -1: %v", err)
	}
}

// TestLowRankMaxRank checks that MaxRank caps the ranks Energy chooses
// (randomized SVD below min(tokens, head_dim) - 8) and leaves lower ones.
func TestLowRankMaxRank(t *testing.T) {
	d := desc(format.ChunkK, format.DTypeBF16, [3]int{2, 100, 64})
	src := kvData(d, 9)
	for _, tc := range []struct {
		o    Options
		want func(r int) bool
	}{
		{Options{Energy: 0.999, MaxRank: 16}, func(r int) bool { return r == 16 }},
		{Options{Energy: 0.3, MaxRank: 40}, func(r int) bool { return r >= 1 && r < 40 }},
	} {
		tc.o.RoPE = &ropeLlama3
		enc := mustEncode(t, src, format.CodecLowRank, d, tc.o)
		for h := range d.Heads {
			if r := lowRankRank(enc, h); !tc.want(r) {
				t.Errorf("%+v: head %d has rank %d", tc.o, h, r)
			}
		}
		mustDecode(t, enc, format.CodecLowRank, d)
	}
}
