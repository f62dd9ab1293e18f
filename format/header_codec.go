package format

import (
	"encoding/binary"
	"fmt"

	flatbuffers "github.com/google/flatbuffers/go"

	"github.com/kvstore/kvstore/format/fb"
)

// EncodeHeader validates h and returns it as a framed catalog value (a
// KindPacketHeader record holding an fb.PacketHeader). An invalid header is
// ErrInvalidArgument and nothing is encoded.
func EncodeHeader(h *PacketHeader) ([]byte, error) {
	if err := h.Validate(); err != nil {
		return nil, err
	}
	return Seal(KindPacketHeader, buildHeader(h))
}

// DecodeHeader checks and decodes a value EncodeHeader wrote. The frame's
// CRC is checked first, then the FlatBuffer is verified, and only then
// decoded; the result passes Validate. Bad bytes are ErrCorruption, a newer
// format version ErrVersion. It never panics, and allocates at most a few
// times len(b).
func DecodeHeader(b []byte) (h *PacketHeader, err error) {
	body, err := Unseal(KindPacketHeader, b)
	if err != nil {
		return nil, err
	}
	defer recoverCorruption("packet header", &err)
	return decodeHeaderBody(body)
}

// recoverCorruption is the last-resort guard of the decoders: the verifier
// is what keeps the generated accessors in bounds, and the tests run the
// decoders without this guard. Should it ever fire, the panic becomes an
// ErrCorruption instead of crashing the process.
func recoverCorruption(what string, err *error) {
	if r := recover(); r != nil {
		*err = fmt.Errorf("%w: %s: decoder panicked (verifier gap): %v", ErrCorruption, what, r)
	}
}

// minChunkBytes is the fewest body bytes a valid chunk takes: its vector
// entry, and its table's soffset, shape offset, offset, length and raw
// length, all non-zero in a valid chunk and so present. Valid chunks do not
// overlap, so no two share a table; a body with fewer bytes per chunk is
// corrupt, and refusing it keeps allocation within a few times len(body).
const minChunkBytes = 4 + 4 + 4 + 3*8

// decodeHeaderBody verifies and decodes an unsealed header body.
func decodeHeaderBody(body []byte) (*PacketHeader, error) {
	if err := verifyBuffer(body, headerTable); err != nil {
		return nil, err // names the table and field
	}
	t := fb.GetRootAsPacketHeader(body, 0)
	if v := t.Version(); v > FormatMajor {
		return nil, fmt.Errorf("%w: packet header: version %d is newer than %d, which this build reads", ErrVersion, v, FormatMajor)
	}
	// Bound what is allocated below before allocating it.
	l, n := t.Layers(), t.ChunksLength()
	if l > MaxLayers || uint64(n) != chunkCount(l, t.KeptTokens()) {
		return nil, fmt.Errorf("%w: packet header: %d chunks for %d layers (kept tokens %d)", ErrCorruption, n, l, t.KeptTokens())
	}
	if uint64(n)*minChunkBytes > uint64(len(body)) {
		return nil, fmt.Errorf("%w: packet header: %d chunks cannot fit in %d bytes", ErrCorruption, n, len(body))
	}
	h := readHeader(t)
	if h == nil {
		return nil, fmt.Errorf("%w: packet header: a chunk's shape is not 3 dimensions", ErrCorruption)
	}
	if err := h.Validate(); err != nil {
		return nil, fmt.Errorf("%w: packet header: decoded value is invalid: %v", ErrCorruption, err)
	}
	return h, nil
}

// readHeader copies a verified fb.PacketHeader into a PacketHeader; nil if a
// chunk's shape is not 3 long.
func readHeader(t *fb.PacketHeader) *PacketHeader {
	h := &PacketHeader{
		Version:       t.Version(),
		Namespace:     string(t.Namespace()),
		AdapterID:     string(t.AdapterId()),
		HeaderTokens:  t.HeaderTokens(),
		TrailerTokens: t.TrailerTokens(),
		Tokens:        t.Tokens(),
		BasePosition:  t.BasePosition(),
		Layers:        t.Layers(),
		KVHeads:       t.KvHeads(),
		HeadDim:       t.HeadDim(),
		DType:         DType(t.Dtype()),
		BlobFile:      t.BlobFile(),
		ExtentOffset:  t.ExtentOffset(),
		ExtentLength:  t.ExtentLength(),
		CreatedUnixNs: t.CreatedUnixNs(),
		KeptTokens:    t.KeptTokens(),
	}
	var s fb.Hash256
	if t.Id(&s) != nil {
		h.ID = PacketID(readHash(&s))
	}
	if t.Model(&s) != nil {
		h.Model = Fingerprint(readHash(&s))
	}
	if n := t.TokenIdsLength(); n > 0 {
		h.TokenIDs = make([]uint32, n)
		for i := range h.TokenIDs {
			h.TokenIDs[i] = t.TokenIds(i)
		}
	}
	if n := t.ChunksLength(); n > 0 {
		h.Chunks = make([]ChunkDesc, n)
		var c fb.Chunk
		for i := range h.Chunks {
			t.Chunks(&c, i)
			if !readChunk(&c, &h.Chunks[i]) {
				return nil
			}
		}
	}
	return h
}

// readChunk copies a verified fb.Chunk; false if its shape is not 3 long.
func readChunk(c *fb.Chunk, d *ChunkDesc) bool {
	if c.ShapeLength() != 3 {
		return false
	}
	*d = ChunkDesc{
		Layer:     c.Layer(),
		Kind:      ChunkKind(c.Kind()),
		DType:     DType(c.Dtype()),
		Shape:     []uint32{c.Shape(0), c.Shape(1), c.Shape(2)},
		Codec:     Codec(c.Codec()),
		BlobFile:  c.BlobFile(),
		Offset:    c.Offset(),
		Length:    c.Length(),
		RawLength: c.RawLength(),
		CRC32C:    c.Crc32c(),
	}
	return true
}

// readHash returns the 32 bytes of a Hash256 struct in id order.
func readHash(s *fb.Hash256) (id [32]byte) {
	binary.LittleEndian.PutUint64(id[0:], s.W0())
	binary.LittleEndian.PutUint64(id[8:], s.W1())
	binary.LittleEndian.PutUint64(id[16:], s.W2())
	binary.LittleEndian.PutUint64(id[24:], s.W3())
	return id
}

// createHash writes id as an inline Hash256; call it just before adding the
// field to the open table.
func createHash(b *flatbuffers.Builder, id [32]byte) flatbuffers.UOffsetT {
	le := binary.LittleEndian
	return fb.CreateHash256(b, le.Uint64(id[0:]), le.Uint64(id[8:]), le.Uint64(id[16:]), le.Uint64(id[24:]))
}

// buildHeader returns the FlatBuffer body of a valid header.
func buildHeader(h *PacketHeader) []byte {
	b := flatbuffers.NewBuilder(256 + 4*len(h.TokenIDs) + 96*len(h.Chunks) + len(h.Namespace) + len(h.AdapterID))
	ns := b.CreateString(h.Namespace)
	adapter := b.CreateString(h.AdapterID)
	fb.PacketHeaderStartTokenIdsVector(b, len(h.TokenIDs))
	for i := len(h.TokenIDs) - 1; i >= 0; i-- {
		b.PrependUint32(h.TokenIDs[i])
	}
	tokens := b.EndVector(len(h.TokenIDs))
	chunks := buildChunks(b, h.Chunks)

	fb.PacketHeaderStart(b)
	fb.PacketHeaderAddVersion(b, h.Version)
	fb.PacketHeaderAddNamespace(b, ns)
	fb.PacketHeaderAddId(b, createHash(b, h.ID))
	fb.PacketHeaderAddModel(b, createHash(b, h.Model))
	fb.PacketHeaderAddAdapterId(b, adapter)
	fb.PacketHeaderAddHeaderTokens(b, h.HeaderTokens)
	fb.PacketHeaderAddTrailerTokens(b, h.TrailerTokens)
	fb.PacketHeaderAddTokens(b, h.Tokens)
	fb.PacketHeaderAddTokenIds(b, tokens)
	fb.PacketHeaderAddBasePosition(b, h.BasePosition)
	fb.PacketHeaderAddLayers(b, h.Layers)
	fb.PacketHeaderAddKvHeads(b, h.KVHeads)
	fb.PacketHeaderAddHeadDim(b, h.HeadDim)
	fb.PacketHeaderAddDtype(b, fb.DType(h.DType))
	fb.PacketHeaderAddBlobFile(b, h.BlobFile)
	fb.PacketHeaderAddExtentOffset(b, h.ExtentOffset)
	fb.PacketHeaderAddExtentLength(b, h.ExtentLength)
	fb.PacketHeaderAddCreatedUnixNs(b, h.CreatedUnixNs)
	fb.PacketHeaderAddChunks(b, chunks)
	fb.PacketHeaderAddKeptTokens(b, h.KeptTokens) // omitted when 0: a whole packet's bytes are unchanged
	b.Finish(fb.PacketHeaderEnd(b))
	return b.FinishedBytes()
}

// buildChunks writes the chunk tables and the vector of them.
func buildChunks(b *flatbuffers.Builder, chunks []ChunkDesc) flatbuffers.UOffsetT {
	offs := make([]flatbuffers.UOffsetT, len(chunks))
	for i := range chunks {
		c := &chunks[i]
		fb.ChunkStartShapeVector(b, len(c.Shape))
		for j := len(c.Shape) - 1; j >= 0; j-- {
			b.PrependUint32(c.Shape[j])
		}
		shape := b.EndVector(len(c.Shape))
		fb.ChunkStart(b)
		fb.ChunkAddLayer(b, c.Layer)
		fb.ChunkAddKind(b, fb.ChunkKind(c.Kind))
		fb.ChunkAddDtype(b, fb.DType(c.DType))
		fb.ChunkAddShape(b, shape)
		fb.ChunkAddCodec(b, fb.Codec(c.Codec))
		fb.ChunkAddBlobFile(b, c.BlobFile)
		fb.ChunkAddOffset(b, c.Offset)
		fb.ChunkAddLength(b, c.Length)
		fb.ChunkAddRawLength(b, c.RawLength)
		fb.ChunkAddCrc32c(b, c.CRC32C)
		offs[i] = fb.ChunkEnd(b)
	}
	fb.PacketHeaderStartChunksVector(b, len(offs))
	for i := len(offs) - 1; i >= 0; i-- {
		b.PrependUOffsetT(offs[i])
	}
	return b.EndVector(len(offs))
}
