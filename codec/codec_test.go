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
)

var (
	allCodecs = []format.Codec{format.CodecRaw, format.CodecShuffleZstd, format.CodecInt8, format.CodecInt4}
	allDTypes = []format.DType{format.DTypeBF16, format.DTypeF16, format.DTypeF32}
	allKinds  = []format.ChunkKind{format.ChunkK, format.ChunkV}
	// shapes are [heads, tokens, head_dim]: one token, tokens not a multiple
	// of the group, head dims from 1 to 128, odd element counts, and one
	// chunk of several shuffle blocks.
	shapes = [][3]int{{1, 1, 1}, {1, 1, 3}, {2, 1, 128}, {3, 33, 5}, {1, 31, 7}, {2, 70, 64}, {1, 5, 127}, {2, 100, 3}, {2, 300, 128}}
)

func desc(k format.ChunkKind, dt format.DType, s [3]int) Desc {
	return Desc{Kind: k, DType: dt, Heads: s[0], Tokens: s[1], HeadDim: s[2]}
}

// kvData returns a KV-like tensor of d: keys with per-channel offsets and
// scales (a few outlier channels 15x larger), values with per-token scales.
func kvData(d Desc, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 7))
	f := make([]float32, d.Elems())
	chScale, chMean := make([]float64, d.HeadDim), make([]float64, d.HeadDim)
	for c := range d.HeadDim {
		chScale[c] = math.Exp(0.7 * r.NormFloat64())
		if d.Kind == format.ChunkK && c%37 == 5 {
			chScale[c] *= 15
		}
		chMean[c] = 0.5 * r.NormFloat64() * chScale[c]
	}
	for row := range d.Heads * d.Tokens {
		tokScale := math.Exp(0.3 * r.NormFloat64())
		for c := range d.HeadDim {
			x := r.NormFloat64()
			if d.Kind == format.ChunkK {
				x = chMean[c] + chScale[c]*x
			} else {
				x *= tokScale * math.Sqrt(chScale[c])
			}
			f[row*d.HeadDim+c] = float32(x)
		}
	}
	b := make([]byte, d.RawSize())
	if err := format.FromF32(b, f, d.DType); err != nil {
		panic(err)
	}
	return b
}

func mustEncode(t testing.TB, src []byte, c format.Codec, d Desc, opts Options) []byte {
	t.Helper()
	enc, err := Encode(nil, src, c, d, opts)
	if err != nil {
		t.Fatalf("Encode %v %v: %v", c, d, err)
	}
	bound, err := Bound(c, d, opts)
	if err != nil {
		t.Fatal(err)
	}
	// Low rank may exceed the format's limit (the store keeps it raw then).
	if len(enc) > bound || (c != format.CodecLowRank && uint64(bound) > format.MaxStoredLength(uint64(d.RawSize()))) {
		t.Fatalf("Encode %v %v: %d bytes, Bound %d, format limit %d", c, d, len(enc), bound, format.MaxStoredLength(uint64(d.RawSize())))
	}
	return enc
}

func mustDecode(t testing.TB, enc []byte, c format.Codec, d Desc) []byte {
	t.Helper()
	out := make([]byte, d.RawSize())
	if err := Decode(out, enc, c, d); err != nil {
		t.Fatalf("Decode %v %v: %v", c, d, err)
	}
	return out
}

// TestRoundTrip runs every codec, dtype, kind and shape; lossless codecs
// must return the bytes exactly, lossy ones within their bound (checked in
// full by TestQuantErrorBound).
func TestRoundTrip(t *testing.T) {
	for _, c := range allCodecs {
		for _, dt := range allDTypes {
			for _, k := range allKinds {
				for _, s := range shapes {
					d := desc(k, dt, s)
					t.Run(fmt.Sprintf("%v/%v", c, d), func(t *testing.T) {
						src := kvData(d, uint64(s[0]*s[1]*s[2]))
						out := mustDecode(t, mustEncode(t, src, c, d, Options{}), c, d)
						if c == format.CodecRaw || c == format.CodecShuffleZstd {
							if !bytes.Equal(out, src) {
								t.Fatal("lossless round trip changed the tensor")
							}
							return
						}
						checkQuantBound(t, src, c, d, Options{})
					})
				}
			}
		}
	}
}

// TestLosslessAnyBytes round-trips arbitrary bit patterns (NaNs, infinities,
// subnormals) through the lossless codecs.
func TestLosslessAnyBytes(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, dt := range allDTypes {
		for _, s := range [][3]int{{1, 1, 1}, {2, 3, 5}, {1, 600, 128}} {
			d := desc(format.ChunkV, dt, s)
			src := make([]byte, d.RawSize())
			for i := range src {
				src[i] = byte(r.Uint32())
			}
			for _, c := range []format.Codec{format.CodecRaw, format.CodecShuffleZstd} {
				if out := mustDecode(t, mustEncode(t, src, c, d, Options{}), c, d); !bytes.Equal(out, src) {
					t.Errorf("%v %v: random bytes changed", c, d)
				}
			}
		}
	}
}

// TestShuffleZstdCompresses checks that KV-like bf16 data shrinks and that
// incompressible planes are stored verbatim, within the bound.
func TestShuffleZstdCompresses(t *testing.T) {
	d := desc(format.ChunkK, format.DTypeBF16, [3]int{2, 300, 128})
	src := kvData(d, 3)
	enc := mustEncode(t, src, format.CodecShuffleZstd, d, Options{})
	if ratio := float64(len(src)) / float64(len(enc)); ratio < 1.2 {
		t.Errorf("ratio %.3f on KV-like bf16, want >= 1.2", ratio)
	}
	f, err := parseShuffle(enc, d)
	if err != nil {
		t.Fatal(err)
	}
	// Plane 0 of bf16 is the low exponent bit and the mantissa: near random,
	// so stored verbatim; plane 1, sign and exponent, compresses well.
	if got := int(binary.LittleEndian.Uint32(f.sizes[0:])); got != shuffleBlock {
		t.Errorf("low-byte plane stored in %d bytes, want verbatim %d", got, shuffleBlock)
	}
	if got := int(binary.LittleEndian.Uint32(f.sizes[4:])); got >= shuffleBlock/2 {
		t.Errorf("exponent plane stored in %d bytes, want < %d", got, shuffleBlock/2)
	}
	for _, level := range []int{3, 19} {
		if out := mustDecode(t, mustEncode(t, src, format.CodecShuffleZstd, d, Options{Level: level}), format.CodecShuffleZstd, d); !bytes.Equal(out, src) {
			t.Errorf("level %d: round trip changed the tensor", level)
		}
	}
}

// TestEncodeArguments checks that bad descriptors, options and sources are
// ErrInvalidArgument and leave dst alone.
func TestEncodeArguments(t *testing.T) {
	good := desc(format.ChunkK, format.DTypeBF16, [3]int{1, 2, 3})
	src := kvData(good, 1)
	for _, tc := range []struct {
		name string
		c    format.Codec
		d    Desc
		opts Options
		src  []byte
	}{
		{"kind", format.CodecRaw, Desc{Kind: 3, DType: format.DTypeBF16, Heads: 1, Tokens: 2, HeadDim: 3}, Options{}, src},
		{"dtype int8", format.CodecRaw, Desc{Kind: format.ChunkK, DType: format.DTypeInt8, Heads: 1, Tokens: 2, HeadDim: 6}, Options{}, src},
		{"zero heads", format.CodecRaw, Desc{Kind: format.ChunkK, DType: format.DTypeBF16, Tokens: 2, HeadDim: 3}, Options{}, src},
		{"negative dim", format.CodecRaw, Desc{Kind: format.ChunkK, DType: format.DTypeBF16, Heads: 1, Tokens: 2, HeadDim: -3}, Options{}, src},
		{"huge", format.CodecRaw, Desc{Kind: format.ChunkK, DType: format.DTypeF32, Heads: 1 << 20, Tokens: 1 << 20, HeadDim: 1 << 20}, Options{}, src},
		{"short src", format.CodecShuffleZstd, good, Options{}, src[1:]},
		{"codec", 5, good, Options{}, src},
		{"group", format.CodecInt8, good, Options{GroupSize: MaxGroupSize + 1}, src},
		{"negative grp", format.CodecInt8, good, Options{GroupSize: -1}, src},
		{"scale dtype", format.CodecInt4, good, Options{ScaleDType: format.DTypeBF16}, src},
		{"level", format.CodecShuffleZstd, good, Options{Level: 23}, src},
		{"nan", format.CodecInt8, good, Options{}, withElem(src, format.DTypeBF16, 4, float32(math.NaN()))},
		{"inf", format.CodecInt4, good, Options{}, withElem(src, format.DTypeBF16, 0, float32(math.Inf(-1)))},
		{"range too big", format.CodecInt8, desc(format.ChunkV, format.DTypeF32, [3]int{1, 1, 2}), Options{}, f32Bytes(-3e38, 3e38)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dst := []byte("keep")
			got, err := Encode(dst, tc.src, tc.c, tc.d, tc.opts)
			if !errors.Is(err, format.ErrInvalidArgument) || string(got) != "keep" {
				t.Errorf("%s: Encode = %q, %v; want dst unchanged and ErrInvalidArgument", tc.name, got, err)
			}
		})
	}
}

func withElem(src []byte, dt format.DType, i int, v float32) []byte {
	b := append([]byte(nil), src...)
	if err := format.FromF32(b[i*dt.Size():(i+1)*dt.Size()], []float32{v}, dt); err != nil {
		panic(err)
	}
	return b
}

func f32Bytes(v ...float32) []byte {
	b := make([]byte, 4*len(v))
	if err := format.FromF32(b, v, format.DTypeF32); err != nil {
		panic(err)
	}
	return b
}

// TestDescOf checks the bridge from a packet header's chunk.
func TestDescOf(t *testing.T) {
	c := format.ChunkDesc{Layer: 3, Kind: format.ChunkV, DType: format.DTypeF16, Shape: []uint32{8, 10, 128}, RawLength: 8 * 10 * 128 * 2}
	d, err := DescOf(&c)
	if err != nil || d != (Desc{Kind: format.ChunkV, DType: format.DTypeF16, Heads: 8, Tokens: 10, HeadDim: 128}) {
		t.Fatalf("DescOf = %+v, %v", d, err)
	}
	c.RawLength++
	if _, err := DescOf(&c); !errors.Is(err, format.ErrInvalidArgument) {
		t.Errorf("wrong raw length: %v", err)
	}
	c.Shape = c.Shape[:2]
	if _, err := DescOf(&c); !errors.Is(err, format.ErrInvalidArgument) {
		t.Errorf("rank 2: %v", err)
	}
}

// TestAppends checks that Encode appends to a non-empty dst and that its
// bytes are the same as encoding into nil.
func TestAppends(t *testing.T) {
	d := desc(format.ChunkV, format.DTypeBF16, [3]int{2, 9, 16})
	src := kvData(d, 5)
	for _, c := range allCodecs {
		alone := mustEncode(t, src, c, d, Options{})
		got, err := Encode([]byte("prefix"), src, c, d, Options{})
		if err != nil || string(got[:6]) != "prefix" || !bytes.Equal(got[6:], alone) {
			t.Errorf("%v: Encode after a prefix differs from alone (%v)", c, err)
		}
	}
}
