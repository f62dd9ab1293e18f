package format

import (
	"bytes"
	"encoding/binary"
	"errors"
	"reflect"
	"runtime"
	"strings"
	"testing"

	flatbuffers "github.com/google/flatbuffers/go"

	"github.com/kvstore/kvstore/format/fb"
)

// headerShape is what testHeader builds a valid header from.
type headerShape struct {
	layers, kvHeads, headDim uint32
	dtype                    DType
	hdr, doc, trl            uint32 // token counts
	codec                    Codec
	ns, adapter              string
	kept                     uint32 // > 0: pruned, rows kept per (layer, head)
}

// testHeader returns a valid header of shape s, its chunks packed in one
// extent as the store lays them out.
func testHeader(s headerShape) *PacketHeader {
	tokens := s.hdr + s.doc + s.trl
	var ids []uint32 // nil when empty, as DecodeHeader returns it
	if s.doc > 0 {
		ids = make([]uint32, s.doc)
	}
	for i := range ids {
		ids[i] = uint32(i*7919) % 32000
	}
	h := &PacketHeader{
		Version: FormatMajor, Namespace: s.ns, AdapterID: s.adapter,
		HeaderTokens: s.hdr, TrailerTokens: s.trl, Tokens: tokens, TokenIDs: ids,
		BasePosition: -17, Layers: s.layers, KVHeads: s.kvHeads, HeadDim: s.headDim,
		DType: s.dtype, BlobFile: 3, ExtentOffset: 5 * Alignment, CreatedUnixNs: 1700000000123456789,
	}
	h.ID = ComputePacketID(s.ns, Fingerprint{1, 2, 3}, s.adapter, ids)
	h.Model = Fingerprint{1, 2, 3}
	h.KeptTokens = s.kept
	rows := h.Rows()
	raw := uint64(s.kvHeads) * uint64(rows) * uint64(s.headDim) * uint64(s.dtype.Size())
	off := h.ExtentOffset
	for i := uint32(0); i < 2*s.layers; i++ {
		length := raw
		if s.codec == CodecShuffleZstd {
			length = raw/2 + 1
		}
		h.Chunks = append(h.Chunks, ChunkDesc{
			Layer: i / 2, Kind: ChunkKind(1 + i%2), DType: s.dtype,
			Shape: []uint32{s.kvHeads, rows, s.headDim}, Codec: s.codec, BlobFile: 3,
			Offset: off, Length: length, RawLength: raw, CRC32C: 0xdeadbeef ^ i,
		})
		off, _ = AlignUp(off+length, ChunkAlignment)
	}
	if s.kept > 0 {
		n := uint64(s.layers) * uint64(s.kvHeads) * uint64((tokens+7)/8)
		h.Chunks = append(h.Chunks, ChunkDesc{
			Layer: s.layers, Kind: ChunkPositions, DType: DTypeU8,
			Shape: []uint32{s.layers, s.kvHeads, (tokens + 7) / 8}, Codec: CodecRaw, BlobFile: 3,
			Offset: off, Length: n, RawLength: n, CRC32C: 0x5eed,
		})
	}
	last := h.Chunks[len(h.Chunks)-1]
	h.ExtentLength, _ = ExtentLength(last.Offset + last.Length - h.ExtentOffset)
	return h
}

var smallShape = headerShape{layers: 2, kvHeads: 2, headDim: 8, dtype: DTypeBF16, hdr: 1, doc: 5, trl: 1, ns: "ns", adapter: "a1"}

// prunedShape is smallShape keeping 3 of its 7 rows per (layer, head).
var prunedShape = headerShape{layers: 2, kvHeads: 2, headDim: 8, dtype: DTypeBF16, hdr: 1, doc: 5, trl: 1, ns: "ns", adapter: "a1", kept: 3}

func roundTripHeader(t *testing.T, h *PacketHeader) []byte {
	t.Helper()
	b, err := EncodeHeader(h)
	if err != nil {
		t.Fatalf("EncodeHeader: %v", err)
	}
	got, err := DecodeHeader(b)
	if err != nil {
		t.Fatalf("DecodeHeader: %v", err)
	}
	if !reflect.DeepEqual(got, h) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, h)
	}
	return b
}

func TestHeaderRoundTrip(t *testing.T) {
	long := strings.Repeat("x", MaxNameLen)
	for _, tc := range []struct {
		name string
		s    headerShape
	}{
		{"small", smallShape},
		{"one token", headerShape{layers: 1, kvHeads: 1, headDim: 2, dtype: DTypeF32, doc: 1}},
		{"adapter only", headerShape{layers: 1, kvHeads: 1, headDim: 4, dtype: DTypeF16, hdr: 3, trl: 2}},
		{"odd head dim", headerShape{layers: 3, kvHeads: 3, headDim: 7, dtype: DTypeF16, doc: 9}},
		{"many layers", headerShape{layers: MaxLayers, kvHeads: 1, headDim: 4, dtype: DTypeBF16, doc: 2}},
		{"many chunks", headerShape{layers: 80, kvHeads: 8, headDim: 128, dtype: DTypeBF16, hdr: 4, doc: 300, trl: 4, codec: CodecShuffleZstd}},
		{"max names", headerShape{layers: 1, kvHeads: 1, headDim: 1, dtype: DTypeF32, doc: 3, ns: long, adapter: long}},
		{"max dims", headerShape{layers: 1, kvHeads: MaxKVHeads, headDim: MaxHeadDim, dtype: DTypeF32, doc: 1}},
		{"zstd", headerShape{layers: 2, kvHeads: 2, headDim: 64, dtype: DTypeBF16, doc: 10, codec: CodecShuffleZstd}},
		{"empty strings", headerShape{layers: 1, kvHeads: 2, headDim: 2, dtype: DTypeF16, doc: 4}},
		{"pruned", prunedShape},
		{"pruned zstd", headerShape{layers: 3, kvHeads: 4, headDim: 64, dtype: DTypeBF16, doc: 40, kept: 10, codec: CodecShuffleZstd}},
		{"pruned to one", headerShape{layers: 1, kvHeads: 1, headDim: 2, dtype: DTypeF32, doc: 9, kept: 1}},
		{"pruned all", headerShape{layers: 2, kvHeads: 3, headDim: 4, dtype: DTypeF16, hdr: 2, doc: 3, kept: 5}},
		{"pruned 16", headerShape{layers: 2, kvHeads: 2, headDim: 4, dtype: DTypeBF16, doc: 16, kept: 4}},
		{"pruned 1 of 1", headerShape{layers: 1, kvHeads: 2, headDim: 4, dtype: DTypeBF16, doc: 1, kept: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := testHeader(tc.s)
			if tc.name == "empty strings" {
				h.TokenIDs[0] = 0xffffffff
				h.BasePosition = -1 << 63
				h.CreatedUnixNs = 0
				h.ID = ComputePacketID(h.Namespace, h.Model, h.AdapterID, h.TokenIDs)
			}
			b := roundTripHeader(t, h)
			// Deterministic: the same header encodes to the same bytes.
			if b2, _ := EncodeHeader(h); !bytes.Equal(b, b2) {
				t.Fatal("two encodings of one header differ")
			}
		})
	}
}

// mutateHeader returns a valid header after f changed it.
func mutateHeader(f func(h *PacketHeader)) *PacketHeader {
	h := testHeader(smallShape)
	f(h)
	return h
}

func TestHeaderValidateRejects(t *testing.T) {
	for _, tc := range []struct {
		name string
		f    func(h *PacketHeader)
	}{
		{"version 0", func(h *PacketHeader) { h.Version = 0 }},
		{"newer version", func(h *PacketHeader) { h.Version = FormatMajor + 1 }},
		{"long namespace", func(h *PacketHeader) { h.Namespace = strings.Repeat("n", MaxNameLen+1) }},
		{"long adapter", func(h *PacketHeader) { h.AdapterID = strings.Repeat("a", MaxNameLen+1) }},
		{"zero layers", func(h *PacketHeader) { h.Layers = 0; h.Chunks = nil }},
		{"too many layers", func(h *PacketHeader) { h.Layers = MaxLayers + 1 }},
		{"zero kv heads", func(h *PacketHeader) { h.KVHeads = 0 }},
		{"too many kv heads", func(h *PacketHeader) { h.KVHeads = MaxKVHeads + 1 }},
		{"zero head dim", func(h *PacketHeader) { h.HeadDim = 0 }},
		{"head dim too big", func(h *PacketHeader) { h.HeadDim = MaxHeadDim + 1 }},
		{"int8 dtype", func(h *PacketHeader) { h.DType = DTypeInt8 }},
		{"invalid dtype", func(h *PacketHeader) { h.DType = 9 }},
		{"zero tokens", func(h *PacketHeader) { h.Tokens, h.HeaderTokens, h.TrailerTokens, h.TokenIDs = 0, 0, 0, nil }},
		{"token sum", func(h *PacketHeader) { h.Tokens++ }},
		{"token sum overflow", func(h *PacketHeader) { h.HeaderTokens = 1<<32 - 1 }},
		{"extent misaligned", func(h *PacketHeader) { h.ExtentOffset += 64 }},
		{"extent in blob hdr", func(h *PacketHeader) { h.ExtentOffset = 0 }},
		{"extent len odd", func(h *PacketHeader) { h.ExtentLength += 1 }},
		{"extent len zero", func(h *PacketHeader) { h.ExtentLength = 0 }},
		{"extent overflows", func(h *PacketHeader) { h.ExtentOffset = 1<<64 - Alignment }},
		{"missing chunk", func(h *PacketHeader) { h.Chunks = h.Chunks[:3] }},
		{"extra chunk", func(h *PacketHeader) { h.Chunks = append(h.Chunks, h.Chunks[3]) }},
		{"chunk layer", func(h *PacketHeader) { h.Chunks[2].Layer = 0 }},
		{"chunk kind", func(h *PacketHeader) { h.Chunks[1].Kind = ChunkK }},
		{"chunk shape rank", func(h *PacketHeader) { h.Chunks[0].Shape = h.Chunks[0].Shape[:2] }},
		{"chunk shape", func(h *PacketHeader) { h.Chunks[0].Shape = []uint32{2, 7, 4} }},
		{"chunk dtype", func(h *PacketHeader) { h.Chunks[3].DType = DTypeF16 }},
		{"raw length", func(h *PacketHeader) { h.Chunks[0].RawLength++ }},
		{"unknown codec", func(h *PacketHeader) { h.Chunks[0].Codec = 7 }},
		{"raw length mismatch", func(h *PacketHeader) { h.Chunks[0].Length-- }},
		{"zero length", func(h *PacketHeader) { h.Chunks[0].Codec = CodecShuffleZstd; h.Chunks[0].Length = 0 }},
		{"other blob file", func(h *PacketHeader) { h.Chunks[2].BlobFile = 4 }},
		{"chunk misaligned", func(h *PacketHeader) { h.Chunks[1].Offset += 8 }},
		{"chunk before extent", func(h *PacketHeader) { h.Chunks[0].Offset -= 64 }},
		{"chunk after extent", func(h *PacketHeader) { h.Chunks[3].Offset = h.ExtentOffset + h.ExtentLength }},
		{"chunk over trailer", func(h *PacketHeader) { h.Chunks[3].Offset = h.ExtentOffset + h.ExtentLength - 64 }},
		{"chunk offset wraps", func(h *PacketHeader) { h.Chunks[3].Offset = 1<<64 - 64 }},
		{"overlapping chunks", func(h *PacketHeader) { h.Chunks[2].Offset = h.Chunks[1].Offset }},
		{"overlap by one chunk", func(h *PacketHeader) { h.Chunks[3].Offset = h.Chunks[0].Offset }},
		{"extent too long", func(h *PacketHeader) { h.ExtentLength += Alignment }},
		{"wrong id", func(h *PacketHeader) { h.ID[31] ^= 1 }},
		{"other model", func(h *PacketHeader) { h.Model[0] ^= 1 }},
		{"other token", func(h *PacketHeader) { h.TokenIDs[2]++ }},
		{"other namespace", func(h *PacketHeader) { h.Namespace = "other" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := mutateHeader(tc.f)
			if err := h.Validate(); !errors.Is(err, ErrInvalidArgument) {
				t.Fatalf("Validate = %v, want ErrInvalidArgument", err)
			}
			if _, err := EncodeHeader(h); !errors.Is(err, ErrInvalidArgument) {
				t.Fatalf("EncodeHeader = %v, want ErrInvalidArgument", err)
			}
			// Written anyway, bypassing Validate: the decoder must refuse it.
			b, err := Seal(KindPacketHeader, buildHeader(h))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := DecodeHeader(b); !errors.Is(err, ErrCorruption) && !errors.Is(err, ErrVersion) {
				t.Fatalf("DecodeHeader = %v, want ErrCorruption or ErrVersion", err)
			}
		})
	}
}

// TestPrunedHeaderValidateRejects breaks the rules a pruned header adds:
// Validate refuses each, and the decoder refuses it written anyway.
func TestPrunedHeaderValidateRejects(t *testing.T) {
	pos := func(h *PacketHeader) *ChunkDesc { return &h.Chunks[h.PositionsChunk()] }
	for _, tc := range []struct {
		name string
		f    func(h *PacketHeader)
	}{
		{"keeps more than tokens", func(h *PacketHeader) { h.KeptTokens = h.Tokens + 1 }},
		{"no positions chunk", func(h *PacketHeader) { h.Chunks = h.Chunks[:len(h.Chunks)-1] }},
		{"whole with positions", func(h *PacketHeader) { h.KeptTokens = 0 }},
		{"kept differs from shape", func(h *PacketHeader) { h.KeptTokens = 2 }},
		{"kv shape whole", func(h *PacketHeader) { h.Chunks[0].Shape = []uint32{2, 7, 8} }},
		{"positions layer", func(h *PacketHeader) { pos(h).Layer = 0 }},
		{"positions kind", func(h *PacketHeader) { pos(h).Kind = ChunkV }},
		{"positions dtype", func(h *PacketHeader) { pos(h).DType = DTypeF32 }},
		{"positions dtype int8", func(h *PacketHeader) { pos(h).DType = DTypeInt8 }},
		{"positions u32 list", func(h *PacketHeader) { pos(h).Shape = []uint32{2, 2, 3}; pos(h).Length, pos(h).RawLength = 48, 48 }},
		{"positions shape tokens", func(h *PacketHeader) { pos(h).Shape = []uint32{2, 2, 7}; pos(h).Length, pos(h).RawLength = 28, 28 }},
		{"positions row bytes", func(h *PacketHeader) { pos(h).Shape = []uint32{2, 2, 2}; pos(h).Length, pos(h).RawLength = 8, 8 }},
		{"positions codec", func(h *PacketHeader) { pos(h).Codec = CodecShuffleZstd }},
		{"positions shape", func(h *PacketHeader) { pos(h).Shape = []uint32{2, 2, 4} }},
		{"positions rank", func(h *PacketHeader) { pos(h).Shape = []uint32{2, 6} }},
		{"positions raw length", func(h *PacketHeader) { pos(h).RawLength++ }},
		{"positions short", func(h *PacketHeader) { pos(h).Length-- }},
		{"positions long", func(h *PacketHeader) { pos(h).Length++ }},
		{"positions misaligned", func(h *PacketHeader) { pos(h).Offset += 4 }},
		{"positions over chunk", func(h *PacketHeader) { pos(h).Offset = h.Chunks[3].Offset }},
		{"positions in blob file", func(h *PacketHeader) { pos(h).BlobFile = 9 }},
		{"k chunk in last slot", func(h *PacketHeader) {
			h.Chunks[0], h.Chunks[len(h.Chunks)-1] = h.Chunks[len(h.Chunks)-1], h.Chunks[0]
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := testHeader(prunedShape)
			if err := h.Validate(); err != nil {
				t.Fatalf("unmutated: %v", err)
			}
			tc.f(h)
			if err := h.Validate(); !errors.Is(err, ErrInvalidArgument) {
				t.Fatalf("Validate = %v, want ErrInvalidArgument", err)
			}
			b, err := Seal(KindPacketHeader, buildHeader(h))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := DecodeHeader(b); !errors.Is(err, ErrCorruption) {
				t.Fatalf("DecodeHeader = %v, want ErrCorruption", err)
			}
		})
	}
}

// TestWholeHeaderBytesUnchanged: a whole packet's header leaves
// kept_tokens out, so its bytes are those a writer before the field wrote
// (the vtable ends at chunks), and such bytes decode as a whole packet.
func TestWholeHeaderBytesUnchanged(t *testing.T) {
	body := buildHeader(testHeader(smallShape))
	tab := fb.GetRootAsPacketHeader(body, 0).Table()
	vt := int(tab.Pos) - int(int32(binary.LittleEndian.Uint32(body[tab.Pos:])))
	if got, want := binary.LittleEndian.Uint16(body[vt:]), uint16(4+2*headerTable.slot("chunks")+2); got != want {
		t.Fatalf("whole header's vtable is %d bytes, want %d (no kept_tokens slot)", got, want)
	}
	h, err := decodeHeaderBody(body)
	if err != nil || h.Pruned() || h.Rows() != h.Tokens {
		t.Fatalf("decoded %+v, %v: want a whole packet", h, err)
	}
	pruned := buildHeader(testHeader(prunedShape))
	tab = fb.GetRootAsPacketHeader(pruned, 0).Table()
	vt = int(tab.Pos) - int(int32(binary.LittleEndian.Uint32(pruned[tab.Pos:])))
	if got, want := binary.LittleEndian.Uint16(pruned[vt:]), uint16(4+2*headerTable.slot("kept_tokens")+2); got != want {
		t.Fatalf("pruned header's vtable is %d bytes, want %d", got, want)
	}
}

func TestHeaderShapeOverflow(t *testing.T) {
	h := testHeader(smallShape)
	// Within every limit, the product still fits uint64; overflow needs dims
	// beyond them, so check the arithmetic directly.
	h.KVHeads, h.Tokens, h.HeadDim = 1<<31, 1<<31, 1<<31
	if _, ok := h.chunkRawLength(); ok {
		t.Fatal("2^93-byte chunk did not overflow")
	}
	h.KVHeads, h.Tokens, h.HeadDim = MaxKVHeads, 1<<32-1, MaxHeadDim
	if n, ok := h.chunkRawLength(); !ok || n != MaxKVHeads*(1<<32-1)*MaxHeadDim*2 {
		t.Fatalf("chunkRawLength = %d, %v", n, ok)
	}
}

func TestDecodeHeaderHostileFrames(t *testing.T) {
	good, err := EncodeHeader(testHeader(smallShape))
	if err != nil {
		t.Fatal(err)
	}
	edit := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(good)) }
	reseal := func(b []byte) []byte { binary.LittleEndian.PutUint32(b[12:], frameCRC(b)); return b }
	for _, tc := range []struct {
		name string
		b    []byte
		want error
	}{
		{"empty", nil, ErrCorruption},
		{"bad magic", edit(func(b []byte) []byte { b[0] ^= 1; return b }), ErrCorruption},
		{"spec magic", edit(func(b []byte) []byte { copy(b, "KVMS"); return b }), ErrCorruption},
		{"bad crc", edit(func(b []byte) []byte { b[12] ^= 1; return b }), ErrCorruption},
		{"body bit flip", edit(func(b []byte) []byte { b[40] ^= 0x10; return b }), ErrCorruption},
		{"version flip", edit(func(b []byte) []byte { b[4] = 2; return b }), ErrCorruption},
		{"newer version", edit(func(b []byte) []byte { b[4] = 2; return reseal(b) }), ErrVersion},
		{"version 0", edit(func(b []byte) []byte { b[4] = 0; return reseal(b) }), ErrCorruption},
		{"reserved", edit(func(b []byte) []byte { b[6] = 1; return reseal(b) }), ErrCorruption},
		{"oversized body", edit(func(b []byte) []byte { binary.LittleEndian.PutUint32(b[8:], 1<<30); return b }), ErrCorruption},
		{"short length", edit(func(b []byte) []byte { binary.LittleEndian.PutUint32(b[8:], 8); return reseal(b) }), ErrCorruption},
		{"trailing byte", edit(func(b []byte) []byte { return append(b, 0) }), ErrCorruption},
		{"body too short", reseal(edit(func(b []byte) []byte { binary.LittleEndian.PutUint32(b[8:], 4); return b[:20] })), ErrCorruption},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := DecodeHeader(tc.b); !errors.Is(err, tc.want) {
				t.Fatalf("DecodeHeader = %v, want %v", err, tc.want)
			}
		})
	}
	for n := 0; n < len(good); n++ {
		if _, err := DecodeHeader(good[:n]); !errors.Is(err, ErrCorruption) {
			t.Fatalf("truncated to %d bytes: %v, want ErrCorruption", n, err)
		}
	}
}

// allocated returns the bytes f allocates.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// sharedChunksBody is a header body whose 2*MaxLayers chunk entries all
// point at one chunk table: 8 KiB asking for 2048 descriptors.
func sharedChunksBody() []byte {
	b := flatbuffers.NewBuilder(0)
	fb.ChunkStart(b)
	fb.ChunkAddLayer(b, 0)
	chunk := fb.ChunkEnd(b)
	fb.PacketHeaderStartChunksVector(b, 2*MaxLayers)
	for range 2 * MaxLayers {
		b.PrependUOffsetT(chunk)
	}
	chunks := b.EndVector(2 * MaxLayers)
	fb.PacketHeaderStart(b)
	fb.PacketHeaderAddVersion(b, FormatMajor)
	fb.PacketHeaderAddLayers(b, MaxLayers)
	fb.PacketHeaderAddChunks(b, chunks)
	b.Finish(fb.PacketHeaderEnd(b))
	return b.FinishedBytes()
}

func TestDecodeHeaderAllocationBound(t *testing.T) {
	hostile := sharedChunksBody()
	if err := verifyBuffer(hostile, headerTable); err != nil {
		t.Fatalf("the hostile body should be a well-formed flatbuffer: %v", err)
	}
	valid := buildHeader(testHeader(headerShape{layers: 64, kvHeads: 8, headDim: 128, dtype: DTypeBF16, doc: 100}))
	for _, tc := range []struct {
		name string
		body []byte
	}{{"shared chunk tables", hostile}, {"valid 128 chunks", valid}} {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			n := allocated(func() { _, err = decodeHeaderBody(tc.body) })
			if tc.name == "shared chunk tables" && !errors.Is(err, ErrCorruption) {
				t.Fatalf("%s: %v, want ErrCorruption", tc.name, err)
			}
			t.Logf("%s: %d bytes body, %d allocated", tc.name, len(tc.body), n)
			if limit := 8*uint64(len(tc.body)) + 4096; n > limit {
				t.Errorf("%s: decoding %d bytes allocated %d, limit %d", tc.name, len(tc.body), n, limit)
			}
		})
	}
}

// llamaHeader is a Llama-3.1-8B packet of a 1,000-token document.
var llamaHeader = headerShape{layers: 32, kvHeads: 8, headDim: 128, dtype: DTypeBF16, hdr: 8, doc: 1000, trl: 8, ns: "tenant", adapter: "kvpacket-v1"}

func BenchmarkEncodeHeader(b *testing.B) {
	h := testHeader(llamaHeader)
	enc, _ := EncodeHeader(h)
	b.SetBytes(int64(len(enc)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := EncodeHeader(h); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeHeader(b *testing.B) {
	enc, err := EncodeHeader(testHeader(llamaHeader))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(enc)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeHeader(enc); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkVerifyHeader(b *testing.B) {
	body := buildHeader(testHeader(llamaHeader))
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if err := verifyBuffer(body, headerTable); err != nil {
			b.Fatal(err)
		}
	}
}

func TestDecodeHeaderHostileBodies(t *testing.T) {
	good := buildHeader(testHeader(smallShape))
	tab := fb.GetRootAsPacketHeader(good, 0).Table()
	// vectorAt returns the position of the length word of the vector (or
	// string) in the header's given slot.
	vectorAt := func(slot int) int {
		return int(tab.Vector(flatbuffers.UOffsetT(tab.Offset(flatbuffers.VOffsetT(4+2*slot))))) - 4
	}
	var c fb.Chunk
	fb.GetRootAsPacketHeader(good, 0).Chunks(&c, 1)
	ct := c.Table()
	shapeAt := int(ct.Vector(flatbuffers.UOffsetT(ct.Offset(4+2*3)))) - 4
	set := func(pos int, v uint32) []byte {
		b := bytes.Clone(good)
		binary.LittleEndian.PutUint32(b[pos:], v)
		return b
	}
	for _, tc := range []struct {
		name string
		body []byte
	}{
		{"token ids past end", set(vectorAt(8), 1<<30)},
		{"token ids 2^32-1", set(vectorAt(8), 1<<32-1)},
		{"chunks past end", set(vectorAt(18), 1<<20)},
		{"namespace past end", set(vectorAt(1), uint32(len(good)))},
		{"shape of 4 dims", set(shapeAt, 4)},
		{"shape of 2 dims", set(shapeAt, 2)},
		{"root offset past end", set(0, uint32(len(good)))},
		{"root offset wraps", set(0, 1<<32-4)},
		{"token ids offset wraps", set(int(tab.Pos)+int(tab.Offset(4+2*8)), 1<<32-4)},
		{"empty body", []byte{}},
		{"body of one root offset", []byte{4, 0, 0, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := decodeHeaderBody(tc.body); !errors.Is(err, ErrCorruption) {
				t.Fatalf("decodeHeaderBody = %v, want ErrCorruption", err)
			}
			b, err := Seal(KindPacketHeader, tc.body)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := DecodeHeader(b); !errors.Is(err, ErrCorruption) {
				t.Fatalf("DecodeHeader = %v, want ErrCorruption", err)
			}
		})
	}
}

// TestChunkCodecLengths checks the stored-length rules of the codecs: raw
// stores exactly RawLength, the others between 1 and MaxStoredLength.
func TestChunkCodecLengths(t *testing.T) {
	for _, c := range []Codec{CodecShuffleZstd, CodecInt8, CodecInt4} {
		for _, tc := range []struct {
			extra int64 // added to MaxStoredLength for the last chunk
			ok    bool
		}{{0, true}, {1, false}, {-1, true}} {
			h := testHeader(headerShape{layers: 1, kvHeads: 2, headDim: 3, dtype: DTypeBF16, doc: 5, codec: c})
			last := &h.Chunks[1]
			last.Length = uint64(int64(MaxStoredLength(last.RawLength)) + tc.extra)
			h.ExtentLength, _ = ExtentLength(last.Offset + last.Length - h.ExtentOffset)
			if err := h.Validate(); (err == nil) != tc.ok {
				t.Errorf("%v, length max%+d: Validate = %v, want ok %v", c, tc.extra, err, tc.ok)
			}
		}
	}
	h := testHeader(headerShape{layers: 1, kvHeads: 1, headDim: 4, dtype: DTypeF32, doc: 2, codec: CodecInt4})
	roundTripHeader(t, h)
	h.Chunks[0].Codec = CodecLowRank + 1 // not a codec this version knows
	if err := h.Validate(); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("codec %d: Validate = %v, want ErrInvalidArgument", CodecLowRank+1, err)
	}
}
