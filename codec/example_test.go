package codec_test

import (
	"fmt"

	"github.com/kvstore/kvstore/codec"
	"github.com/kvstore/kvstore/format"
)

// A writer encodes each chunk and records its codec and length in the
// packet header; a reader decodes each chunk straight into its destination.
func Example() {
	d := codec.Desc{Kind: format.ChunkK, DType: format.DTypeBF16, Heads: 2, Tokens: 64, HeadDim: 8}
	raw := make([]byte, d.RawSize())
	vals := make([]float32, d.Elems())
	for i := range vals {
		vals[i] = float32(i%8) - 3.5 // a constant row pattern: each channel constant over tokens
	}
	_ = format.FromF32(raw, vals, d.DType)

	stored, err := codec.Encode(nil, raw, format.CodecInt4, d, codec.Options{GroupSize: 32})
	if err != nil {
		panic(err)
	}
	dst := make([]byte, d.RawSize()) // e.g. a slice of an Assemble destination
	if err := codec.Decode(dst, stored, format.CodecInt4, d); err != nil {
		panic(err)
	}
	// 8-byte header, 2 heads x 2 token groups x 8 channels of f16 scales and
	// offsets (128 bytes), 1024 codes in 512 bytes.
	fmt.Printf("%d raw bytes stored in %d, decoded exactly: %v\n", len(raw), len(stored), string(dst) == string(raw))
	// Output: 2048 raw bytes stored in 648, decoded exactly: true
}
