package fuzz

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/kvstore/kvstore/codec"
	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/format/safetensors"
	"github.com/kvstore/kvstore/reconstruct"
	"github.com/kvstore/kvstore/segment"
)

// allocBudget is the most a decoder may allocate for an input of at most
// 1 MiB.
const allocBudget = 64 << 20

// decoder is one decoder of untrusted bytes, with good inputs to start
// from and, for containers (records that hold a count of things), the
// record kind to reseal a mutated body with.
type decoder struct {
	name   string
	decode func(b []byte)
	seeds  [][]byte
	kind   *format.RecordKind // framed: mutate the body, reseal with this kind
}

func decoders(tb testing.TB) []decoder {
	meta, head := spanSeeds(tb)
	m, err := format.DecodeSpanMeta(meta)
	if err != nil {
		tb.Fatal(err)
	}
	spanK, ok := format.KindOf([]byte("KVSP"))
	if !ok {
		tb.Fatal("record kind KVSP is not registered")
	}
	factors, err := reconstruct.AppendFactors(nil, &reconstruct.Factors{Rows: 4, Cols: 3, Rank: 2,
		U: make([]float32, 8), S: []float32{2, 1}, Vt: make([]float32, 6)}, format.DTypeF16)
	if err != nil {
		tb.Fatal(err)
	}
	proj, err := (&segment.Projection{Dim: 2, HeadDim: 4, W: make([]float32, 8)}).MarshalBinary()
	if err != nil {
		tb.Fatal(err)
	}
	tr := format.Trailer{Packet: format.PacketID{1}, Offset: format.BlobHeaderSize, PayloadLen: 100}
	hk, sk := format.KindPacketHeader, format.KindModelSpec
	bk, ak := format.KindBlobFile, format.KindAccess
	rs := recordSeeds(tb)
	return []decoder{
		{name: "packet header", decode: func(b []byte) { _, _ = format.DecodeHeader(b) }, seeds: headerSeeds(tb)[:3], kind: &hk},
		{name: "model spec", decode: func(b []byte) { _, _ = format.DecodeModelSpec(b) }, seeds: specSeeds(tb)[:5], kind: &sk},
		{name: "span meta", decode: func(b []byte) { _, _ = format.DecodeSpanMeta(b) }, seeds: [][]byte{meta}, kind: &spanK},
		{name: "span head", decode: func(b []byte) { _, _ = format.DecodeHeadMeta(b, m) }, seeds: [][]byte{head}, kind: &spanK},
		{name: "FORMAT file", decode: func(b []byte) { _, _ = format.DecodeFormatFile(b) }, seeds: [][]byte{format.EncodeFormatFile(format.Current)}},
		{name: "trailer", decode: func(b []byte) { _, _ = format.DecodeTrailer(b) }, seeds: [][]byte{tr.Encode()}},
		{name: "blob header", decode: func(b []byte) { _, _ = format.DecodeBlobHeader(b) }, seeds: [][]byte{format.EncodeBlobHeader(3)}},
		{name: "factors", decode: func(b []byte) { _, _, _ = reconstruct.DecodeFactors(b) }, seeds: [][]byte{factors}},
		{name: "projection", decode: func(b []byte) { var p segment.Projection; _ = p.UnmarshalBinary(b) }, seeds: [][]byte{proj}},
		{name: "chunk codecs", decode: decodeChunk, seeds: codecSeeds(tb)},
		{name: "blob file record", decode: func(b []byte) { _, _ = format.DecodeBlobFileRecord(b) }, seeds: rs["FuzzDecodeBlobFileRecord"][:1], kind: &bk},
		{name: "access statistics", decode: func(b []byte) { _, _, _ = format.DecodeAccess(b) }, seeds: rs["FuzzDecodeAccess"][:1], kind: &ak},
		{name: "artifact", decode: func(b []byte) { _, _ = format.DecodeArtifact(b) }, seeds: rs["FuzzDecodeArtifact"][:2]},
		{name: "keep-set", decode: func(b []byte) { _, _ = format.DecodeKeepSet(b) }, seeds: rs["FuzzDecodeKeepSet"][:1]},
		{name: "positions", decode: func(b []byte) {
			if len(b) >= 4 {
				_, _ = format.DecodePositions(b[4:], int(b[0]), int(b[1]), int(b[2]), int(b[3]))
			}
		}, seeds: rs["FuzzDecodePositions"][:1]},
		{name: "safetensors", decode: func(b []byte) { _, _ = safetensors.Decode(b) }, seeds: safetensorsSeeds(tb)},
	}
}

// decodeChunk decodes a FuzzCodecDecode input (the caller allocates the
// output, sized by the descriptor: at most 4*80*64*4 bytes).
func decodeChunk(b []byte) {
	c, d, chunk, ok := codecInput(b)
	if !ok {
		return
	}
	_ = codec.Decode(make([]byte, d.RawSize()), chunk, c, d)
}

// allocs returns the bytes f allocates.
func allocs(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// hostileInputs are inputs of at most 1 MiB built from s: s itself, s
// with a huge count or length written at every 4-byte position (resealed
// when framed), s padded to 1 MiB, and 1 MiB of 0xff and of random bytes.
func hostileInputs(d decoder, s []byte, rng *rand.Rand) [][]byte {
	ins := [][]byte{s, append(bytes.Clone(s), make([]byte, 1<<20-len(s))...)}
	body, frame := s, false
	if d.kind != nil && len(s) > format.FrameSize {
		body, frame = s[format.FrameSize:], true
	}
	for pos := 0; pos+8 <= len(body); pos += 4 {
		for _, v := range []uint64{1<<32 - 1, 1 << 40} {
			b := bytes.Clone(body)
			if v>>32 == 0 {
				binary.LittleEndian.PutUint32(b[pos:], uint32(v))
			} else {
				binary.LittleEndian.PutUint64(b[pos:], v)
			}
			if frame {
				sealed, err := format.Seal(*d.kind, b)
				if err != nil {
					continue
				}
				b = sealed
			}
			ins = append(ins, b)
		}
	}
	ff := bytes.Repeat([]byte{0xff}, 1<<20)
	rnd := make([]byte, 1<<20)
	for i := range rnd {
		rnd[i] = byte(rng.Uint32())
	}
	return append(ins, ff, rnd)
}

// TestDecodeAllocationBound feeds every decoder its seeds and hostile
// inputs of at most 1 MiB (huge counts and lengths at every position,
// padding, junk): none allocates more than 64 MiB, and none panics.
func TestDecodeAllocationBound(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	for _, d := range decoders(t) {
		t.Run(d.name, func(t *testing.T) {
			var worst uint64
			n := 0
			for _, s := range d.seeds {
				for _, in := range hostileInputs(d, s, rng) {
					if len(in) > 1<<20 {
						in = in[:1<<20]
					}
					a := allocs(func() { d.decode(in) })
					worst = max(worst, a)
					n++
					if a > allocBudget {
						t.Fatalf("%d-byte input allocated %d bytes", len(in), a)
					}
				}
			}
			t.Logf("%d inputs of at most 1 MiB: at most %d bytes allocated by one decode", n, worst)
		})
	}
}

// TestHugeCountFailsFast gives each container decoder a 4 KiB input whose
// body claims 2^40 (or 2^32-1) of something at every position: each
// decode fails or succeeds having allocated at most 1 MiB, so nothing was
// sized by the claim.
func TestHugeCountFailsFast(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 2))
	for _, d := range decoders(t) {
		if d.kind == nil {
			continue
		}
		t.Run(d.name, func(t *testing.T) {
			n := 0
			for _, s := range d.seeds {
				if len(s) > 4<<10 {
					t.Fatalf("seed of %d bytes is over 4 KiB", len(s))
				}
				for _, in := range hostileInputs(d, s, rng) {
					if len(in) > 4<<10 {
						continue
					}
					if a := allocs(func() { d.decode(in) }); a > 1<<20 {
						t.Fatalf("a %d-byte input claiming a huge count allocated %d bytes", len(in), a)
					}
					n++
				}
			}
			t.Logf("%d inputs of at most 4 KiB claiming huge counts: each allocated at most 1 MiB", n)
		})
	}
}

// TestSafetensorsHugeClaimsFailFast: 4 KiB safetensors files whose header
// claims 2^40 bytes of header, or a tensor of 2^40 elements and bytes,
// fail with ErrCorruption having allocated at most 1 MiB.
func TestSafetensorsHugeClaimsFailFast(t *testing.T) {
	file := func(hdrLen uint64, h string) []byte {
		b := binary.LittleEndian.AppendUint64(nil, hdrLen)
		b = append(b, h...)
		return append(b, make([]byte, 4<<10-len(b))...)
	}
	huge := `{"t":{"dtype":"U8","shape":[1048576,1048576],"data_offsets":[0,1099511627776]}}`
	many := `{"t":{"dtype":"U8","shape":[1099511627776],"data_offsets":[0,1099511627776]}}`
	for _, tc := range []struct {
		name string
		b    []byte
	}{
		{"header length 2^40", file(1<<40, `{}`)},
		{"tensor of 2^40", file(uint64(len(huge)), huge)},
		{"2^40 elements", file(uint64(len(many)), many)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			if a := allocs(func() { _, err = safetensors.Decode(tc.b) }); a > 1<<20 {
				t.Errorf("%s: allocated %d bytes", tc.name, a)
			}
			if !errors.Is(err, format.ErrCorruption) {
				t.Errorf("%s: Decode = %v, want ErrCorruption", tc.name, err)
			}
		})
	}
}
