package fuzz

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/kvstore/kvstore/codec"
	"github.com/kvstore/kvstore/format"
)

// A FuzzCodecDecode input is a 5-byte prefix saying what the chunk is,
// then the stored chunk:
//
//	0 codec (mod 6: 5 is unknown) | 1 bit 0: K or V, bits 1..: dtype (mod 3) |
//	2 heads-1 (mod 4) | 3 tokens-1 (mod 80) | 4 head_dim-1 (mod 64) | chunk ...
const codecPrefix = 5

var fuzzDTypes = []format.DType{format.DTypeBF16, format.DTypeF16, format.DTypeF32}

// codecInput parses an input's prefix.
func codecInput(b []byte) (format.Codec, codec.Desc, []byte, bool) {
	if len(b) < codecPrefix {
		return 0, codec.Desc{}, nil, false
	}
	d := codec.Desc{
		Kind:    format.ChunkKind(1 + b[1]&1),
		DType:   fuzzDTypes[int(b[1]>>1)%len(fuzzDTypes)],
		Heads:   1 + int(b[2])%4,
		Tokens:  1 + int(b[3])%80,
		HeadDim: 1 + int(b[4])%64,
	}
	return format.Codec(b[0] % 6), d, b[codecPrefix:], true
}

// codecPrefixOf is the prefix codecInput parses back to (c, d).
func codecPrefixOf(c format.Codec, d codec.Desc) []byte {
	dt := 0
	for i, x := range fuzzDTypes {
		if x == d.DType {
			dt = i
		}
	}
	return []byte{byte(c), byte(d.Kind-1) | byte(dt<<1), byte(d.Heads - 1), byte(d.Tokens - 1), byte(d.HeadDim - 1)}
}

// FuzzCodecDecode feeds stored chunks to codec.Decode. Nothing may panic;
// errors wrap ErrCorruption; a lossless chunk that decodes re-encodes to
// one that decodes to the same tensor, and a lossy one decodes to finite
// values only.
func FuzzCodecDecode(f *testing.F) {
	for _, s := range codecSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		c, d, chunk, ok := codecInput(b)
		if !ok {
			return
		}
		out := make([]byte, d.RawSize())
		if err := codec.Decode(out, chunk, c, d); err != nil {
			checkErr(t, err)
			return
		}
		if c == format.CodecInt8 || c == format.CodecInt4 || c == format.CodecLowRank {
			checkFinite(t, out, d)
			return
		}
		again, err := codec.Encode(nil, out, c, d, codec.Options{})
		if err != nil {
			t.Fatalf("decoded %v chunk does not encode: %v", c, err)
		}
		out2 := make([]byte, d.RawSize())
		if err := codec.Decode(out2, again, c, d); err != nil || !bytes.Equal(out, out2) {
			t.Fatalf("re-encoded %v chunk decodes differently (%v)", c, err)
		}
	})
}

func checkFinite(t *testing.T, out []byte, d codec.Desc) {
	f := make([]float32, d.Elems())
	if err := format.ToF32(f, out, d.DType); err != nil {
		t.Fatal(err)
	}
	for i, x := range f {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			t.Fatalf("lossy chunk decoded element %d to %v", i, x)
		}
	}
}

// codecSeeds are good chunks of every codec and broken ones, prefixed.
func codecSeeds(tb testing.TB) [][]byte {
	var seeds [][]byte
	for i, c := range []format.Codec{format.CodecRaw, format.CodecShuffleZstd, format.CodecInt8, format.CodecInt4, format.CodecLowRank} {
		for j, d := range []codec.Desc{
			{Kind: format.ChunkK, DType: format.DTypeBF16, Heads: 2, Tokens: 40, HeadDim: 16},
			{Kind: format.ChunkV, DType: format.DTypeF16, Heads: 1, Tokens: 3, HeadDim: 5},
			{Kind: format.ChunkK, DType: format.DTypeF32, Heads: 3, Tokens: 1, HeadDim: 7},
		} {
			raw := make([]byte, d.RawSize())
			vals := make([]float32, d.Elems())
			for k := range vals {
				vals[k] = float32(math.Sin(float64(k*(i+j+3)))) * float32(1+k%7)
			}
			if err := format.FromF32(raw, vals, d.DType); err != nil {
				tb.Fatal(err)
			}
			// Low rank: ranks 2, 4, 8; keys need a RoPE of even rotary dims.
			rope := format.RoPE{Style: format.RoPERotateHalf, Theta: 10000, RotaryDims: d.HeadDim &^ 1}
			enc, err := codec.Encode(nil, raw, c, d, codec.Options{GroupSize: 8 << j, Rank: 2 << j, RoPE: &rope})
			if err != nil {
				tb.Fatal(err)
			}
			good := append(codecPrefixOf(c, d), enc...)
			seeds = append(seeds, good)
			if j == 0 {
				seeds = append(seeds, good[:len(good)/2], flip(good, codecPrefix+1), flip(good, codecPrefix+9))
			}
		}
	}
	return seeds
}

// TestCodecSeedsDecode checks that the good seeds decode, so that the
// corpus starts from chunks that reach the whole decoder.
func TestCodecSeedsDecode(t *testing.T) {
	decoded := 0
	for _, s := range codecSeeds(t) {
		c, d, chunk, _ := codecInput(s)
		err := codec.Decode(make([]byte, d.RawSize()), chunk, c, d)
		if err == nil {
			decoded++
		} else if !errors.Is(err, format.ErrCorruption) {
			t.Fatalf("seed: %v", err)
		}
	}
	if decoded < 15 {
		t.Fatalf("%d seeds decode, want the 15 good ones at least", decoded)
	}
}

// TestWriteCodecSeedCorpus rewrites testdata/fuzz/FuzzCodecDecode/seed-*,
// like TestWriteSeedCorpus, when KVSTORE_WRITE_CORPUS is set.
func TestWriteCodecSeedCorpus(t *testing.T) {
	if os.Getenv("KVSTORE_WRITE_CORPUS") == "" {
		t.Skip("set KVSTORE_WRITE_CORPUS=1 to rewrite the seed corpus")
	}
	dir := filepath.Join("testdata", "fuzz", "FuzzCodecDecode")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for i, in := range codecSeeds(t) {
		data := "go test fuzz v1\n[]byte(" + strconv.Quote(string(in)) + ")\n"
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("seed-%d", i)), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
