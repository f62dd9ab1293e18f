package fuzz

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/kvstore/kvstore/format"
)

// packetHeader returns a valid header of the given shape, its chunks packed
// in one extent as the store lays them out.
func packetHeader(layers, kvHeads, headDim, docTokens, adapterTokens uint32, dt format.DType, codec format.Codec) *format.PacketHeader {
	tokens := docTokens + 2*adapterTokens
	var ids []uint32
	for i := range docTokens {
		ids = append(ids, i*31%500)
	}
	model := format.Fingerprint{9, 8, 7}
	h := &format.PacketHeader{
		Version: format.FormatMajor, Namespace: "tenant", ID: format.ComputePacketID("tenant", model, "adapter", ids),
		Model: model, AdapterID: "adapter", HeaderTokens: adapterTokens, TrailerTokens: adapterTokens,
		Tokens: tokens, TokenIDs: ids, BasePosition: 42, Layers: layers, KVHeads: kvHeads, HeadDim: headDim,
		DType: dt, BlobFile: 1, ExtentOffset: format.BlobHeaderSize, CreatedUnixNs: 1,
	}
	raw := uint64(kvHeads) * uint64(tokens) * uint64(headDim) * uint64(dt.Size())
	off := h.ExtentOffset
	for i := range 2 * layers {
		n := raw
		if codec == format.CodecShuffleZstd {
			n = raw/3 + 1
		}
		h.Chunks = append(h.Chunks, format.ChunkDesc{
			Layer: i / 2, Kind: format.ChunkKind(1 + i%2), DType: dt, Shape: []uint32{kvHeads, tokens, headDim},
			Codec: codec, BlobFile: 1, Offset: off, Length: n, RawLength: raw, CRC32C: i,
		})
		off, _ = format.AlignUp(off+n, format.ChunkAlignment)
	}
	last := h.Chunks[len(h.Chunks)-1]
	h.ExtentLength, _ = format.ExtentLength(last.Offset + last.Length - h.ExtentOffset)
	return h
}

// prunedHeader is packetHeader (raw chunks) of a packet stored pruned,
// keeping kept rows per (layer, KV head): compacted K|V chunks and the
// positions bitmap chunk after them.
func prunedHeader(layers, kvHeads, headDim, docTokens, adapterTokens, kept uint32, dt format.DType) *format.PacketHeader {
	h := packetHeader(layers, kvHeads, headDim, docTokens, adapterTokens, dt, format.CodecRaw)
	h.KeptTokens = kept
	raw := uint64(kvHeads) * uint64(kept) * uint64(headDim) * uint64(dt.Size())
	off := h.ExtentOffset
	for i := range h.Chunks {
		c := &h.Chunks[i]
		c.Shape = []uint32{kvHeads, kept, headDim}
		c.Offset, c.Length, c.RawLength = off, raw, raw
		off, _ = format.AlignUp(off+raw, format.ChunkAlignment)
	}
	n := uint64(layers) * uint64(kvHeads) * uint64(h.PositionsRowBytes())
	h.Chunks = append(h.Chunks, format.ChunkDesc{
		Layer: layers, Kind: format.ChunkPositions, DType: format.DTypeU8, Shape: h.PositionsShape(),
		Codec: format.CodecRaw, BlobFile: 1, Offset: off, Length: n, RawLength: n, CRC32C: 77,
	})
	h.ExtentLength, _ = format.ExtentLength(off + n - h.ExtentOffset)
	return h
}

// headerSeeds are good header values and broken ones: the first three
// (whole packets) and the last (a pruned packet) are good.
func headerSeeds(tb testing.TB) [][]byte {
	var seeds [][]byte
	for _, h := range []*format.PacketHeader{
		packetHeader(2, 2, 8, 5, 1, format.DTypeBF16, format.CodecRaw),
		packetHeader(1, 1, 3, 1, 0, format.DTypeF32, format.CodecRaw),
		packetHeader(3, 1, 4, 0, 2, format.DTypeF16, format.CodecShuffleZstd),
	} {
		b, err := format.EncodeHeader(h)
		if err != nil {
			tb.Fatal(err)
		}
		seeds = append(seeds, b)
	}
	good := seeds[0]
	truncated := append([]byte(nil), good[:len(good)/2]...)
	badCRC := append([]byte(nil), good...)
	badCRC[13] ^= 1
	hugeLen := append([]byte(nil), good...)
	binary.LittleEndian.PutUint32(hugeLen[8:], 1<<31)
	pruned, err := format.EncodeHeader(prunedHeader(2, 3, 8, 6, 1, 3, format.DTypeBF16))
	if err != nil {
		tb.Fatal(err)
	}
	return append(seeds, truncated, badCRC, hugeLen, []byte("KVPH"), pruned)
}

// specSeeds are good model spec values and broken ones.
func specSeeds(tb testing.TB) [][]byte {
	var seeds [][]byte
	for _, m := range []*format.ModelSpec{
		{Architecture: "llama", Layers: 32, KVHeads: 8, HeadDim: 128, DType: format.DTypeBF16, WeightsID: "w",
			RoPE: format.RoPE{Style: format.RoPERotateHalf, Theta: 500000, Scaling: format.RoPEScalingLlama3,
				Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OriginalMaxPos: 8192}},
		{Architecture: "llama2.c", Layers: 5, KVHeads: 4, HeadDim: 8, DType: format.DTypeF32,
			RoPE: format.RoPE{Style: format.RoPEInterleaved, Theta: 10000}},
		{Layers: 2, KVHeads: 1, HeadDim: 96, DType: format.DTypeF16,
			RoPE: format.RoPE{Style: format.RoPERotateHalf, RotaryDims: 64, Theta: 10000, Scaling: format.RoPEScalingYaRN,
				Factor: 4, OriginalMaxPos: 2048, BetaFast: 32, BetaSlow: 1, AttentionFactor: 1.2}},
		{Layers: 1, KVHeads: 1, HeadDim: 64, DType: format.DTypeBF16,
			RoPE: format.RoPE{Style: format.RoPEInterleaved, Theta: 10000, Scaling: format.RoPEScalingYaRN, Factor: 40,
				OriginalMaxPos: 4096, BetaFast: 32, BetaSlow: 1, YaRNNoTruncate: true, Mscale: 0.707, MscaleAllDim: 1}},
		{Layers: 1, KVHeads: 2, HeadDim: 64, DType: format.DTypeF16,
			RoPE: format.RoPE{Style: format.RoPERotateHalf, Theta: 10000, Scaling: format.RoPEScalingDynamic, Factor: 2, OriginalMaxPos: 2048}},
	} {
		b, err := format.EncodeModelSpec(m)
		if err != nil {
			tb.Fatal(err)
		}
		seeds = append(seeds, b)
	}
	bad := append([]byte(nil), seeds[0]...)
	bad[len(bad)-3] ^= 0x40
	return append(seeds, bad, seeds[1][:20])
}

// TestGoodSeedsDecode keeps the seeds meaningful: the good ones must decode,
// or the fuzzers start from nothing but errors.
func TestGoodSeedsDecode(t *testing.T) {
	hs := headerSeeds(t)
	for i, b := range hs[:3] {
		if _, err := format.DecodeHeader(b); err != nil {
			t.Errorf("header seed %d: %v", i, err)
		}
	}
	if h, err := format.DecodeHeader(hs[len(hs)-1]); err != nil || !h.Pruned() {
		t.Errorf("pruned header seed: pruned %v, %v", err == nil && h.Pruned(), err)
	}
	for i, b := range specSeeds(t)[:5] {
		if _, err := format.DecodeModelSpec(b); err != nil {
			t.Errorf("spec seed %d: %v", i, err)
		}
	}
}

// TestPrunedCorpusDecodes keeps the stored pruned seeds in step with the
// format: FuzzDecodeHeader/seed-7 and FuzzDecodeHeaderBody/pruned-0 are the
// pruned header seed (whole, and its body), and decode as a pruned packet.
func TestPrunedCorpusDecodes(t *testing.T) {
	hs := headerSeeds(t)
	want := hs[len(hs)-1]
	for _, tc := range []struct {
		path string
		body bool
	}{
		{"testdata/fuzz/FuzzDecodeHeader/seed-7", false},
		{"testdata/fuzz/FuzzDecodeHeaderBody/pruned-0", true},
	} {
		t.Run(tc.path, func(t *testing.T) {
			b := readCorpusFile(t, tc.path)
			if tc.body {
				var err error
				if b, err = format.Seal(format.KindPacketHeader, b); err != nil {
					t.Fatal(err)
				}
			}
			if !bytes.Equal(b, want) {
				t.Errorf("%s is not the pruned header seed: rewrite it", tc.path)
			}
			if h, err := format.DecodeHeader(b); err != nil || !h.Pruned() {
				t.Errorf("%s: pruned %v, %v", tc.path, err == nil && h.Pruned(), err)
			}
		})
	}
}

// readCorpusFile returns the one []byte value of a "go test fuzz v1" file.
func readCorpusFile(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.FromSlash(path))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) != 2 || lines[0] != "go test fuzz v1" || !strings.HasPrefix(lines[1], "[]byte(") || !strings.HasSuffix(lines[1], ")") {
		t.Fatalf("%s: not a one-value fuzz corpus file", path)
	}
	s, err := strconv.Unquote(strings.TrimSuffix(strings.TrimPrefix(lines[1], "[]byte("), ")"))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return []byte(s)
}
