package codec

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"runtime"
	"testing"

	"github.com/klauspost/compress/zstd"

	"github.com/kvstore/kvstore/format"
)

// decodeErr decodes enc and fails on a panic or an error that is not
// ErrCorruption; it returns Decode's error.
func decodeErr(t *testing.T, enc []byte, c format.Codec, d Desc) (err error) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("Decode %v %v of %d bytes panicked: %v", c, d, len(enc), r)
		}
	}()
	err = Decode(make([]byte, d.RawSize()), enc, c, d)
	if err != nil && !errors.Is(err, format.ErrCorruption) {
		t.Fatalf("Decode %v %v: %v, want nil or ErrCorruption", c, d, err)
	}
	return err
}

var smallShapes = [][3]int{{1, 1, 3}, {2, 5, 7}, {1, 33, 4}}

// TestTruncated cuts small chunks at every length and extends them by one
// byte: every such chunk is corrupt.
func TestTruncated(t *testing.T) {
	for _, c := range allCodecs {
		for _, dt := range allDTypes {
			for _, k := range allKinds {
				for _, s := range smallShapes {
					d := desc(k, dt, s)
					enc := mustEncode(t, kvData(d, 1), c, d, Options{GroupSize: 4})
					for n := range len(enc) {
						if err := decodeErr(t, enc[:n], c, d); err == nil {
							t.Fatalf("%v %v: %d of %d bytes decoded", c, d, n, len(enc))
						}
					}
					if err := decodeErr(t, append(enc, 0), c, d); err == nil {
						t.Fatalf("%v %v: a trailing byte decoded", c, d)
					}
				}
			}
		}
	}
}

// TestBitFlips flips every bit of small chunks: decoding must not panic and
// fail only with ErrCorruption. A flip in the header bytes that say what
// the chunk is (bits, parameter type, axis, reserved; frame count) must be
// caught; flips in data are the chunk CRC's job.
func TestBitFlips(t *testing.T) {
	for _, c := range allCodecs[1:] {
		for _, dt := range allDTypes {
			for _, k := range allKinds {
				for _, s := range smallShapes[:2] { // tokens past G = 4, odd element counts
					d := desc(k, dt, s)
					enc := mustEncode(t, kvData(d, 2), c, d, Options{GroupSize: 4})
					for bit := range 8 * len(enc) {
						b := append([]byte(nil), enc...)
						b[bit/8] ^= 1 << (bit % 8)
						err := decodeErr(t, b, c, d)
						if err == nil && mustCatch(c, bit/8) {
							t.Fatalf("%v %v: flip of bit %d in the header decoded", c, d, bit)
						}
					}
				}
			}
		}
	}
}

// mustCatch reports whether a flip in byte i of a chunk under c must be
// detected: for shuffle-zstd the frame count (the table sums catch most
// other flips; another block size can give the same frames); for int8/int4
// every header byte but the group size (for the same reason).
func mustCatch(c format.Codec, i int) bool {
	if c == format.CodecShuffleZstd {
		return i >= 4 && i < shuffleHeader
	}
	return i < quantHeader && i != 2 && i != 3
}

// TestDecodeArguments checks the caller's errors: they are
// ErrInvalidArgument, an unknown codec ErrCorruption.
func TestDecodeArguments(t *testing.T) {
	d := desc(format.ChunkK, format.DTypeF16, [3]int{1, 2, 3})
	enc := mustEncode(t, kvData(d, 1), format.CodecRaw, d, Options{})
	if err := Decode(make([]byte, d.RawSize()+1), enc, format.CodecRaw, d); !errors.Is(err, format.ErrInvalidArgument) {
		t.Errorf("long dst: %v", err)
	}
	if err := Decode(nil, enc, format.CodecRaw, Desc{}); !errors.Is(err, format.ErrInvalidArgument) {
		t.Errorf("zero Desc: %v", err)
	}
	if err := Decode(make([]byte, d.RawSize()), enc, 5, d); !errors.Is(err, format.ErrCorruption) {
		t.Errorf("codec 5: %v", err)
	}
}

// TestHostileShuffle feeds hand-made shuffle-zstd chunks.
func TestHostileShuffle(t *testing.T) {
	d := desc(format.ChunkV, format.DTypeBF16, [3]int{1, 10, 10}) // 100 elements: 2 planes of 100 bytes
	plane := make([]byte, 100)
	verbatim := shuffleChunk(100, 2, plane, plane)
	if err := decodeErr(t, verbatim, format.CodecShuffleZstd, d); err != nil {
		t.Fatalf("hand-made good chunk: %v", err)
	}
	enc, _ := zstd.NewWriter(nil)
	small := enc.EncodeAll(make([]byte, 50), nil)
	big := enc.EncodeAll(make([]byte, 1000), nil)
	for _, tc := range []struct {
		name string
		b    []byte
	}{
		{"block 0", shuffleChunk(0, 2, plane, plane)},
		{"block too big", shuffleChunk(maxShuffleBlock+1, 2, plane, plane)},
		{"frame count", shuffleChunk(100, 3, plane, plane, plane[:0])},
		{"blocks of 50", shuffleChunk(50, 2, plane, plane)},
		{"sizes short", verbatim[:len(verbatim)-1]},
		{"stored > plane", shuffleChunk(100, 2, append(plane, 0), plane[1:])},
		{"not zstd", shuffleChunk(100, 2, []byte("hello"), plane)},
		{"frame too short", shuffleChunk(100, 2, small, plane)},
		{"frame too long", shuffleChunk(100, 2, big, plane)},
		{"huge content size", shuffleChunk(100, 2, hugeFCSFrame(), plane)},
		{"empty stored plane", shuffleChunk(100, 2, nil, plane)},
		{"frame then garbage", shuffleChunk(100, 2, append(enc.EncodeAll(plane, nil), 1, 2, 3), plane)},
		{"frame count 2^32-1", append(binary.LittleEndian.AppendUint32(binary.LittleEndian.AppendUint32(nil, 100), math.MaxUint32), make([]byte, 64)...)},
		{"header only", verbatim[:8]},
		{"sizes overflow-ish", shuffleChunkSizes(100, []uint32{math.MaxUint32, 101}, plane)},
		{"20 KiB of rle", shuffleChunk(100, 2, rleFrame(20, 10), plane)},
		{"window larger (2GB)", shuffleChunk(100, 2, bigWindowFrame(), plane)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := decodeErr(t, tc.b, format.CodecShuffleZstd, d); err == nil {
				t.Errorf("%s: decoded", tc.name)
			}
		})
	}
}

// shuffleChunk builds a shuffle-zstd chunk from its fields and stored planes.
func shuffleChunk(block, frames uint32, planes ...[]byte) []byte {
	var sizes []uint32
	for _, p := range planes {
		sizes = append(sizes, uint32(len(p)))
	}
	b := binary.LittleEndian.AppendUint32(nil, block)
	b = binary.LittleEndian.AppendUint32(b, frames)
	for _, s := range sizes {
		b = binary.LittleEndian.AppendUint32(b, s)
	}
	for _, p := range planes {
		b = append(b, p...)
	}
	return b
}

func shuffleChunkSizes(block uint32, sizes []uint32, data []byte) []byte {
	b := binary.LittleEndian.AppendUint32(nil, block)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(sizes)))
	for _, s := range sizes {
		b = binary.LittleEndian.AppendUint32(b, s)
	}
	return append(b, data...)
}

// hugeFCSFrame is a zstd frame that claims 2^40 bytes of content and holds
// one 10-byte RLE block.
func hugeFCSFrame() []byte {
	b := binary.LittleEndian.AppendUint32(nil, 0xFD2FB528)
	b = append(b, 0xE0) // 8-byte content size, single segment
	b = binary.LittleEndian.AppendUint64(b, 1<<40)
	return append(b, rleBlock(10, true)...)
}

// rleFrame is a zstd frame without a content size, holding n RLE blocks of
// 2^log bytes, its window size: 6 + 4n bytes that expand to n<<log.
func rleFrame(n, log int) []byte {
	b := binary.LittleEndian.AppendUint32(nil, 0xFD2FB528)
	b = append(b, 0x00, byte(log-10)<<3) // no content size, window 2^log
	for i := range n {
		b = append(b, rleBlock(1<<log, i == n-1)...)
	}
	return b
}

// bigWindowFrame asks for a 2 GiB window.
func bigWindowFrame() []byte {
	b := binary.LittleEndian.AppendUint32(nil, 0xFD2FB528)
	b = append(b, 0x00, 21<<3) // window log 31
	return append(b, rleBlock(10, true)...)
}

func rleBlock(size int, last bool) []byte {
	h := uint32(size)<<3 | 1<<1
	if last {
		h |= 1
	}
	return []byte{byte(h), byte(h >> 8), byte(h >> 16), 7}
}

// TestHostileQuant feeds int8/int4 chunks with bad headers and parameters.
func TestHostileQuant(t *testing.T) {
	type hostile struct {
		name string
		b    []byte
	}
	for _, dt := range allDTypes {
		for _, c := range []format.Codec{format.CodecInt8, format.CodecInt4} {
			d := desc(format.ChunkV, dt, [3]int{1, 1, 3}) // one group of 3 with G=4
			good := mustEncode(t, f32AsDType(dt, 1, 2, 3), c, d, Options{GroupSize: 4, ScaleDType: format.DTypeF32})
			set := func(i int, v byte) []byte { b := append([]byte(nil), good...); b[i] = v; return b }
			param := func(at int, v float32) []byte {
				b := append([]byte(nil), good...)
				binary.LittleEndian.PutUint32(b[at:], math.Float32bits(v))
				return b
			}
			group0 := append(set(2, 0), 0)[:len(good)]
			group0[2], group0[3] = 0, 0
			cases := []hostile{
				{"bits", set(0, 16)},
				{"scale dtype", set(1, byte(format.DTypeBF16))},
				{"group 0", group0},
				{"axis 0", set(4, 0)},
				{"axis 3", set(4, 3)},
				{"reserved", set(7, 1)},
				{"nan scale", param(8, float32(math.NaN()))},
				{"negative scale", param(8, -1)},
				{"inf scale", param(8, float32(math.Inf(1)))},
				{"nan offset", param(12, float32(math.NaN()))},
				{"inf offset", param(12, float32(math.Inf(-1)))},
				{"top overflows", param(8, math.MaxFloat32/2)},
			}
			if dt == format.DTypeF16 {
				cases = append(cases, hostile{"offset beyond f16", param(12, 70000)})
			}
			if c == format.CodecInt4 {
				cases = append(cases, hostile{"padding nibble", set(len(good)-1, good[len(good)-1]|0x10)})
			}
			for _, tc := range cases {
				t.Run(fmt.Sprintf("%v/%v/%s", c, dt, tc.name), func(t *testing.T) {
					if err := decodeErr(t, tc.b, c, d); err == nil {
						t.Errorf("%v %v %s: decoded", c, dt, tc.name)
					}
				})
			}
		}
	}
}

func f32AsDType(dt format.DType, v ...float32) []byte {
	b := make([]byte, len(v)*dt.Size())
	_ = format.FromF32(b, v, dt)
	return b
}

// TestDecodeMemory checks that hostile chunks claiming large contents make
// Decode allocate no more than a bounded amount.
func TestDecodeMemory(t *testing.T) {
	d := desc(format.ChunkV, format.DTypeBF16, [3]int{1, 256, 256}) // planes of 64 KiB
	plane := make([]byte, 1<<16)
	for _, tc := range []struct {
		name string
		b    []byte
	}{
		{"huge content size", shuffleChunk(1<<16, 2, hugeFCSFrame(), plane)},
		{"16 MiB of RLE", shuffleChunk(1<<16, 2, rleFrame(128, 17), plane)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dst := make([]byte, d.RawSize())
			_ = Decode(dst, tc.b, format.CodecShuffleZstd, d) // warm the pools
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			const runs = 10
			for range runs {
				if err := Decode(dst, tc.b, format.CodecShuffleZstd, d); !errors.Is(err, format.ErrCorruption) {
					t.Fatalf("%s: %v", tc.name, err)
				}
			}
			runtime.ReadMemStats(&after)
			per := (after.TotalAlloc - before.TotalAlloc) / runs
			if per > 1<<20 {
				t.Errorf("%s: %d bytes allocated per decode, want < 1 MiB", tc.name, per)
			}
		})
	}
}
