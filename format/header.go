package format

import "fmt"

// ChunkKind says whether a chunk holds keys or values. On-disk values.
type ChunkKind uint8

const (
	ChunkK ChunkKind = 1
	ChunkV ChunkKind = 2
)

func (k ChunkKind) String() string {
	switch k {
	case ChunkK:
		return "K"
	case ChunkV:
		return "V"
	}
	return "?"
}

// Codec is how a chunk's bytes are encoded. On-disk values; never renumber.
type Codec uint8

const (
	CodecRaw         Codec = 0 // the tensor's bytes as they are
	CodecShuffleZstd Codec = 1 // byte-shuffle by element size, then zstd
	CodecInt8        Codec = 2 // 8-bit group quantization, KIVI-style (lossy)
	CodecInt4        Codec = 3 // 4-bit group quantization, KIVI-style (lossy)
	// 4 is reserved for a low-rank codec.
)

// Valid reports whether c is a codec this version knows. The byte layouts
// are in docs/format.md, "Chunk codecs", and package format/codec.
func (c Codec) Valid() bool { return c <= CodecInt4 }

func (c Codec) String() string {
	switch c {
	case CodecRaw:
		return "raw"
	case CodecShuffleZstd:
		return "shuffle-zstd"
	case CodecInt8:
		return "int8"
	case CodecInt4:
		return "int4"
	}
	return fmt.Sprintf("codec(%d)", uint8(c))
}

// ChunkDesc describes one (layer, K|V) chunk of a packet: a tensor of shape
// [kv_heads][tokens][head_dim] stored at [Offset, Offset+Length) of a blob
// file, with the CRC32C of those stored bytes.
type ChunkDesc struct {
	Layer     uint32
	Kind      ChunkKind
	DType     DType
	Shape     []uint32 // [kv_heads, tokens, head_dim]
	Codec     Codec
	BlobFile  uint32
	Offset    uint64 // absolute offset in the blob file
	Length    uint64 // stored (encoded) bytes
	RawLength uint64 // decoded bytes: product(Shape) * DType.Size()
	CRC32C    uint32 // of the stored bytes
}

// PacketHeader is everything the catalog keeps about one packet. Its chunks
// are listed layer-major, K before V: chunk 2*l is layer l's K, 2*l+1 its V.
//
// Tokens counts every KV row: HeaderTokens adapter rows, then the document's
// len(TokenIDs) rows, then TrailerTokens adapter rows. Keys are stored
// post-RoPE at local positions 0..Tokens-1; BasePosition records where the
// caller's keys started before they were normalised to 0.
type PacketHeader struct {
	Version       uint16 // FormatMajor at write time
	Namespace     string
	ID            PacketID
	Model         Fingerprint
	AdapterID     string
	HeaderTokens  uint32
	TrailerTokens uint32
	Tokens        uint32
	TokenIDs      []uint32
	BasePosition  int64
	Layers        uint32
	KVHeads       uint32
	HeadDim       uint32
	DType         DType
	// The extent holding every chunk, trailer included.
	BlobFile      uint32
	ExtentOffset  uint64
	ExtentLength  uint64
	CreatedUnixNs int64
	Chunks        []ChunkDesc
}
