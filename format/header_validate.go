package format

import (
	"fmt"
	"math/bits"
	"slices"
)

// Validate checks everything a header promises about itself; EncodeHeader
// runs it before writing and DecodeHeader after reading, so a header that
// comes out of the catalog is one that could have gone in. It returns
// ErrInvalidArgument naming the first broken rule:
//
//   - 1 <= Version <= FormatMajor; strings at most MaxNameLen bytes;
//   - Layers, KVHeads, HeadDim in [1, MaxLayers|MaxKVHeads|MaxHeadDim];
//     DType is f32, f16 or bf16;
//   - Tokens >= 1 (a packet holds at least one row) and
//     Tokens == HeaderTokens + len(TokenIDs) + TrailerTokens;
//   - ExtentOffset is Alignment-aligned and after the blob header;
//     ExtentLength is a positive multiple of Alignment, at least TrailerSize,
//     and the extent's end does not overflow;
//   - KeptTokens <= Tokens (0: a whole packet; else pruned, see Pruned);
//   - len(Chunks) == 2*Layers (+1 when pruned), chunk i < 2*Layers is layer
//     i/2, K if i is even, V if odd;
//   - every K|V chunk has Shape [KVHeads, Rows(), HeadDim], the header's
//     DType, RawLength == product(Shape) * DType.Size(), a known codec,
//     Length > 0 (== RawLength for CodecRaw, <= MaxStoredLength(RawLength)
//     for the others);
//   - a pruned packet's chunk 2*Layers is its positions bitmap: layer
//     Layers, kind ChunkPositions, DType DTypeU8, Shape PositionsShape()
//     ([Layers, KVHeads, ceil(Tokens/8)]), raw, Length == RawLength ==
//     product(Shape) (the bits themselves are the reader's to check);
//   - every chunk has the header's BlobFile, a ChunkAlignment-aligned
//     Offset, and lies inside the extent before its trailer;
//   - no two chunks overlap;
//   - ExtentLength == ExtentLength(end of the last chunk - ExtentOffset), the
//     extent the store lays out, no longer;
//   - ID == ComputePacketID(Namespace, Model, AdapterID, TokenIDs).
func (h *PacketHeader) Validate() error {
	if err := h.validateScalars(); err != nil {
		return err
	}
	if err := h.validateExtent(); err != nil {
		return err
	}
	if want := chunkCount(h.Layers, h.KeptTokens); uint64(len(h.Chunks)) != want {
		return h.bad("%d chunks for %d layers (kept tokens %d), want %d", len(h.Chunks), h.Layers, h.KeptTokens, want)
	}
	raw, ok := h.chunkRawLength()
	if !ok {
		return h.bad("chunk size %d x %d x %d x %d overflows", h.KVHeads, h.Rows(), h.HeadDim, h.DType.Size())
	}
	for i := range h.Chunks {
		var err error
		if i < 2*int(h.Layers) {
			err = h.validateChunk(i, raw)
		} else {
			err = h.validatePositions(i)
		}
		if err == nil {
			err = h.validatePlacement(i)
		}
		if err != nil {
			return err
		}
	}
	if err := h.validateNoOverlap(); err != nil {
		return err
	}
	return h.validateIdentity()
}

// validateIdentity checks the two derived fields: the extent is exactly as
// long as its payload and trailer need, and the id is the one
// ComputePacketID derives. Both make a corrupt field visible that no
// structural check would see.
func (h *PacketHeader) validateIdentity() error {
	var end uint64 // relative to the extent; chunks are in range already
	for i := range h.Chunks {
		end = max(end, h.Chunks[i].Offset-h.ExtentOffset+h.Chunks[i].Length)
	}
	if want, _ := ExtentLength(end); h.ExtentLength != want {
		return h.bad("extent length %d, its %d-byte payload needs %d", h.ExtentLength, end, want)
	}
	if id := ComputePacketID(h.Namespace, h.Model, h.AdapterID, h.TokenIDs); id != h.ID {
		return h.bad("id is not the packet id of its namespace, model, adapter and tokens (%s)", id.Short())
	}
	return nil
}

func (h *PacketHeader) bad(format string, args ...any) error {
	return fmt.Errorf("%w: packet header %s: %s", ErrInvalidArgument, h.ID.Short(), fmt.Sprintf(format, args...))
}

func (h *PacketHeader) validateScalars() error {
	switch {
	case h.Version == 0 || h.Version > FormatMajor:
		return h.bad("version %d not in [1, %d]", h.Version, FormatMajor)
	case len(h.Namespace) > MaxNameLen || len(h.AdapterID) > MaxNameLen:
		return h.bad("namespace or adapter id longer than %d bytes", MaxNameLen)
	case h.Layers == 0 || h.Layers > MaxLayers:
		return h.bad("layers %d not in [1, %d]", h.Layers, MaxLayers)
	case h.KVHeads == 0 || h.KVHeads > MaxKVHeads:
		return h.bad("kv heads %d not in [1, %d]", h.KVHeads, MaxKVHeads)
	case h.HeadDim == 0 || h.HeadDim > MaxHeadDim:
		return h.bad("head dim %d not in [1, %d]", h.HeadDim, MaxHeadDim)
	case !h.DType.Float():
		return h.bad("dtype %v is not f32, f16 or bf16", h.DType)
	case h.Tokens == 0:
		return h.bad("no tokens")
	case h.KeptTokens > h.Tokens:
		return h.bad("keeps %d of %d tokens", h.KeptTokens, h.Tokens)
	}
	sum := uint64(h.HeaderTokens) + uint64(len(h.TokenIDs)) + uint64(h.TrailerTokens)
	if sum != uint64(h.Tokens) {
		return h.bad("tokens %d != %d header + %d document + %d trailer", h.Tokens, h.HeaderTokens, len(h.TokenIDs), h.TrailerTokens)
	}
	return nil
}

func (h *PacketHeader) validateExtent() error {
	switch {
	case h.ExtentOffset%Alignment != 0 || h.ExtentOffset < BlobHeaderSize:
		return h.bad("extent offset %d not a %d-aligned position after the blob header", h.ExtentOffset, Alignment)
	case h.ExtentLength%Alignment != 0 || h.ExtentLength < TrailerSize:
		return h.bad("extent length %d not a positive multiple of %d", h.ExtentLength, Alignment)
	case h.ExtentOffset+h.ExtentLength < h.ExtentOffset:
		return h.bad("extent [%d, +%d) overflows", h.ExtentOffset, h.ExtentLength)
	}
	return nil
}

// MaxStoredLength is the most bytes any codec stores for a chunk of raw
// bytes: 5*raw + 64. The largest encoding is int8 with one-element groups and
// f32 scales and offsets, 9 bytes per 2-byte element plus an 8-byte header
// (codec's Bound gives each codec's exact limit). raw comes from a
// validated shape (< 2^56), so the result does not overflow.
func MaxStoredLength(raw uint64) uint64 { return 5*raw + 64 }

// chunkCount is the number of chunks of a packet of layers layers that
// keeps kept rows per (layer, KV head): one K and one V per layer, and a
// positions chunk when it is pruned (kept > 0).
func chunkCount(layers, kept uint32) uint64 {
	n := 2 * uint64(layers)
	if kept > 0 {
		n++
	}
	return n
}

// chunkRawLength is KVHeads*Rows()*HeadDim*DType.Size(); false on overflow.
func (h *PacketHeader) chunkRawLength() (uint64, bool) {
	n := uint64(h.KVHeads)
	for _, f := range []uint64{uint64(h.Rows()), uint64(h.HeadDim), uint64(h.DType.Size())} {
		hi, lo := bits.Mul64(n, f)
		if hi != 0 {
			return 0, false
		}
		n = lo
	}
	return n, true
}

// validateChunk checks K|V chunk i's identity, shape and lengths.
func (h *PacketHeader) validateChunk(i int, raw uint64) error {
	c := &h.Chunks[i]
	kind := ChunkK
	if i%2 == 1 {
		kind = ChunkV
	}
	rows := h.Rows()
	switch {
	case c.Layer != uint32(i/2) || c.Kind != kind:
		return h.bad("chunk %d is layer %d %v, want layer %d %v", i, c.Layer, c.Kind, i/2, kind)
	case len(c.Shape) != 3 || c.Shape[0] != h.KVHeads || c.Shape[1] != rows || c.Shape[2] != h.HeadDim:
		return h.bad("chunk %d shape %v, want [%d %d %d]", i, c.Shape, h.KVHeads, rows, h.HeadDim)
	case c.DType != h.DType:
		return h.bad("chunk %d dtype %v, header %v", i, c.DType, h.DType)
	case c.RawLength != raw:
		return h.bad("chunk %d raw length %d, shape and dtype give %d", i, c.RawLength, raw)
	case !c.Codec.Valid():
		return h.bad("chunk %d: unknown codec %d", i, c.Codec)
	case c.Length == 0 || (c.Codec == CodecRaw && c.Length != c.RawLength) || c.Length > MaxStoredLength(c.RawLength):
		return h.bad("chunk %d: stored length %d for raw length %d, codec %v", i, c.Length, c.RawLength, c.Codec)
	}
	return nil
}

// validatePositions checks a pruned packet's positions chunk i: every
// field is determined by the header. Limits keep the product below 2^50.
func (h *PacketHeader) validatePositions(i int) error {
	c := &h.Chunks[i]
	want := h.PositionsShape()
	raw := uint64(want[0]) * uint64(want[1]) * uint64(want[2]) * uint64(DTypeU8.Size())
	switch {
	case c.Layer != h.Layers || c.Kind != ChunkPositions || c.DType != DTypeU8 || c.Codec != CodecRaw:
		return h.bad("chunk %d is layer %d %v %v %v, want the positions chunk: layer %d positions u8 raw", i, c.Layer, c.Kind, c.DType, c.Codec, h.Layers)
	case !slices.Equal(c.Shape, want):
		return h.bad("positions chunk shape %v, want %v", c.Shape, want)
	case c.RawLength != raw || c.Length != raw:
		return h.bad("positions chunk of %d bytes (raw %d), want %d", c.Length, c.RawLength, raw)
	}
	return nil
}

// validatePlacement checks that chunk i lies in the header's extent.
func (h *PacketHeader) validatePlacement(i int) error {
	c := &h.Chunks[i]
	payloadEnd := h.ExtentLength - TrailerSize // relative to the extent
	switch {
	case c.BlobFile != h.BlobFile:
		return h.bad("chunk %d in blob file %d, extent in %d", i, c.BlobFile, h.BlobFile)
	case c.Offset%ChunkAlignment != 0:
		return h.bad("chunk %d offset %d not %d-aligned", i, c.Offset, ChunkAlignment)
	case c.Offset < h.ExtentOffset || c.Offset-h.ExtentOffset > payloadEnd ||
		c.Length > payloadEnd-(c.Offset-h.ExtentOffset):
		return h.bad("chunk %d [%d, +%d) outside extent payload [%d, +%d)", i, c.Offset, c.Length, h.ExtentOffset, payloadEnd)
	}
	return nil
}

// validateNoOverlap checks that no two chunks share a byte. Chunks are in
// range already, so Offset+Length does not overflow.
func (h *PacketHeader) validateNoOverlap() error {
	order := make([]int, len(h.Chunks))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int {
		switch x, y := h.Chunks[a].Offset, h.Chunks[b].Offset; {
		case x < y:
			return -1
		case x > y:
			return 1
		}
		return 0
	})
	for k := 1; k < len(order); k++ {
		prev, cur := &h.Chunks[order[k-1]], &h.Chunks[order[k]]
		if prev.Offset+prev.Length > cur.Offset {
			return h.bad("chunks %d [%d, +%d) and %d [%d, +%d) overlap",
				order[k-1], prev.Offset, prev.Length, order[k], cur.Offset, cur.Length)
		}
	}
	return nil
}
