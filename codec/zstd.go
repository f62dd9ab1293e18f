package codec

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"sync"

	"github.com/klauspost/compress/zstd"

	"github.com/kvstore/kvstore/format"
)

const (
	// shuffleBlock is the block size Encode writes, in elements: bf16
	// blocks of 128 KiB with 64 KiB planes, each plane one zstd block.
	shuffleBlock = 1 << 16
	// maxShuffleBlock is the largest block Decode accepts; it bounds the
	// scratch (E*B bytes) and every zstd frame's content (B bytes).
	maxShuffleBlock = 1 << 18
	// shuffleHeader is the size of the B and F fields.
	shuffleHeader = 8
)

// shuffleZstdBound is the most bytes encodeShuffleZstd writes: the header,
// the size table, and every plane verbatim.
func shuffleZstdBound(d Desc) int {
	frames := ceilDiv(d.Elems(), shuffleBlock) * d.DType.Size()
	return shuffleHeader + 4*frames + d.RawSize()
}

func encodeShuffleZstd(dst, src []byte, d Desc, opts *Options) ([]byte, error) {
	enc, err := encoder(opts.zstdLevel())
	if err != nil {
		return dst, err
	}
	n, size := d.Elems(), d.DType.Size()
	blocks := ceilDiv(n, shuffleBlock)
	dst = binary.LittleEndian.AppendUint32(dst, shuffleBlock)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(blocks*size))
	table := len(dst)
	dst = append(dst, make([]byte, 4*blocks*size)...)
	scratch := getScratch(min(n, shuffleBlock) * size)
	defer putScratch(scratch)
	for b := range blocks {
		elems := min(shuffleBlock, n-b*shuffleBlock)
		planes := (*scratch)[:elems*size]
		shuffle(planes, src[b*shuffleBlock*size:][:elems*size], size)
		for p := range size {
			plane := planes[p*elems : (p+1)*elems]
			before := len(dst)
			dst = enc.EncodeAll(plane, dst)
			if len(dst)-before >= elems { // zstd did not help: store it verbatim
				dst = append(dst[:before], plane...)
			}
			binary.LittleEndian.PutUint32(dst[table+4*(b*size+p):], uint32(len(dst)-before))
		}
	}
	return dst, nil
}

// shuffleFrames is a parsed shuffle-zstd chunk.
type shuffleFrames struct {
	block int    // B
	sizes []byte // F u32 sizes
	data  []byte // the frames
}

// parseShuffle checks the header and the size table of a shuffle-zstd chunk.
func parseShuffle(src []byte, d Desc) (shuffleFrames, error) {
	c := format.CodecShuffleZstd
	if len(src) < shuffleHeader {
		return shuffleFrames{}, corrupt(c, d, "%d bytes, shorter than its header", len(src))
	}
	block := int64(binary.LittleEndian.Uint32(src))
	frames := int64(binary.LittleEndian.Uint32(src[4:]))
	if block < 1 || block > maxShuffleBlock {
		return shuffleFrames{}, corrupt(c, d, "block of %d elements not in [1, %d]", block, maxShuffleBlock)
	}
	want := int64(ceilDiv(d.Elems(), int(block)) * d.DType.Size())
	if frames != want {
		return shuffleFrames{}, corrupt(c, d, "%d frames, blocks of %d elements need %d", frames, block, want)
	}
	if int64(len(src)-shuffleHeader) < 4*frames {
		return shuffleFrames{}, corrupt(c, d, "%d bytes cannot hold %d frame sizes", len(src), frames)
	}
	f := shuffleFrames{block: int(block), sizes: src[shuffleHeader : shuffleHeader+4*frames], data: src[shuffleHeader+4*frames:]}
	var sum int64
	for i := 0; i < len(f.sizes); i += 4 {
		sum += int64(binary.LittleEndian.Uint32(f.sizes[i:]))
	}
	if sum != int64(len(f.data)) {
		return shuffleFrames{}, corrupt(c, d, "frame sizes add up to %d, %d bytes follow the table", sum, len(f.data))
	}
	return f, nil
}

func decodeShuffleZstd(dst, src []byte, d Desc) error {
	f, err := parseShuffle(src, d)
	if err != nil {
		return err
	}
	n, size := d.Elems(), d.DType.Size()
	scratch := getScratch(min(n, f.block) * size)
	defer putScratch(scratch)
	off := 0
	for b := 0; b*f.block < n; b++ {
		elems := min(f.block, n-b*f.block)
		planes := (*scratch)[:elems*size]
		for p := range size {
			k := b*size + p
			stored := int(binary.LittleEndian.Uint32(f.sizes[4*k:]))
			if err := decodePlane(planes[p*elems:(p+1)*elems], f.data[off:off+stored]); err != nil {
				return corrupt(format.CodecShuffleZstd, d, "block %d plane %d at frame offset %d: %v", b, p, off, err)
			}
			off += stored
		}
		unshuffle(dst[b*f.block*size:][:elems*size], planes, size)
	}
	return nil
}

// decodePlane fills plane from its stored bytes: verbatim when they are as
// long as the plane, else one zstd frame that must decode to exactly it.
func decodePlane(plane, stored []byte) error {
	switch {
	case len(stored) > len(plane):
		return fmt.Errorf("%d stored bytes for a %d-byte plane", len(stored), len(plane))
	case len(stored) == len(plane):
		copy(plane, stored)
		return nil
	}
	dec, err := decoder()
	if err != nil {
		return err
	}
	out, err := dec.DecodeAll(stored, plane[:0:len(plane)])
	if err != nil {
		return fmt.Errorf("zstd: %w", err)
	}
	if len(out) != len(plane) {
		return fmt.Errorf("zstd frame holds %d bytes, want %d", len(out), len(plane))
	}
	if &out[0] != &plane[0] { // cannot happen with the cap limit; be sure
		copy(plane, out)
	}
	return nil
}

// Encoders by level and the one decoder, built on first use. EncodeAll and
// DecodeAll are safe for concurrent use, each running up to GOMAXPROCS (at
// first use) calls at once.
var (
	zstdMu   sync.Mutex
	encoders = map[zstd.EncoderLevel]*zstd.Encoder{}
	dec      struct {
		once sync.Once
		d    *zstd.Decoder
		err  error
	}
)

func encoder(level zstd.EncoderLevel) (*zstd.Encoder, error) {
	zstdMu.Lock()
	defer zstdMu.Unlock()
	if e := encoders[level]; e != nil {
		return e, nil
	}
	e, err := zstd.NewWriter(nil,
		zstd.WithEncoderLevel(level),
		zstd.WithAllLitEntropyCompression(true),
		zstd.WithEncoderCRC(false),
		zstd.WithSingleSegment(true),
		zstd.WithEncoderConcurrency(runtime.GOMAXPROCS(0)))
	if err != nil {
		return nil, fmt.Errorf("%w: codec: zstd encoder level %v: %v", format.ErrInvalidArgument, level, err)
	}
	encoders[level] = e
	return e, nil
}

func decoder() (*zstd.Decoder, error) {
	dec.once.Do(func() {
		dec.d, dec.err = zstd.NewReader(nil,
			zstd.WithDecoderConcurrency(runtime.GOMAXPROCS(0)),
			zstd.WithDecoderMaxMemory(maxShuffleBlock),
			zstd.WithDecoderMaxWindow(maxShuffleBlock),
			zstd.WithDecodeAllCapLimit(true))
	})
	if dec.err != nil {
		return nil, fmt.Errorf("zstd decoder: %w", dec.err)
	}
	return dec.d, nil
}

// scratchPool holds block buffers for shuffling (*[]byte, any capacity).
var scratchPool sync.Pool

func getScratch(n int) *[]byte {
	if p, ok := scratchPool.Get().(*[]byte); ok && cap(*p) >= n {
		*p = (*p)[:n]
		return p
	}
	b := make([]byte, n)
	return &b
}

func putScratch(p *[]byte) { scratchPool.Put(p) }

func ceilDiv(a, b int) int { return (a + b - 1) / b }
