package packet

import (
	"time"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store/internal/bloblog"
)

// newHeader describes packet d of model fp and id stored as laid out by
// lay, but not where: place says that.
func newHeader(d *Desc, fp format.Fingerprint, id format.PacketID, lay *bloblog.Layout) *format.PacketHeader {
	m := d.Model
	h := &format.PacketHeader{
		Version: format.FormatMajor, Namespace: d.Namespace, ID: id, Model: fp, AdapterID: d.AdapterID,
		HeaderTokens: uint32(d.HeaderTokens), TrailerTokens: uint32(d.TrailerTokens), Tokens: uint32(d.Tokens()),
		TokenIDs: d.TokenIDs, BasePosition: int64(d.BasePosition),
		Layers: uint32(m.Layers), KVHeads: uint32(m.KVHeads), HeadDim: uint32(m.HeadDim), DType: m.DType,
		Chunks: make([]format.ChunkDesc, lay.Chunks),
	}
	shape := []uint32{uint32(m.KVHeads), uint32(d.Rows()), uint32(m.HeadDim)}
	if d.Kept > 0 {
		h.KeptTokens = uint32(d.Kept)
		n := uint64(len(d.Positions))
		h.Chunks[h.PositionsChunk()] = format.ChunkDesc{
			Layer: h.Layers, Kind: format.ChunkPositions, DType: format.DTypeU8,
			Shape: h.PositionsShape(), Codec: format.CodecRaw, Length: n, RawLength: n,
		}
	}
	for i := range 2 * m.Layers {
		kind := format.ChunkK
		if i%2 == 1 {
			kind = format.ChunkV
		}
		h.Chunks[i] = format.ChunkDesc{
			Layer: uint32(i / 2), Kind: kind, DType: m.DType, Shape: shape, Codec: lay.Codec(i),
			Length: lay.Size(i), RawLength: lay.Raw,
		}
	}
	return h
}

// place records in h that its extent, laid out as lay, is at off in blob
// file file and written now, and that its chunks' CRC32Cs are crcs (nil:
// zeros, for a header that only measures its record).
func place(h *format.PacketHeader, file uint32, off uint64, lay *bloblog.Layout, crcs []uint32) {
	h.BlobFile, h.ExtentOffset, h.ExtentLength = file, off, lay.Length
	h.CreatedUnixNs = time.Now().UnixNano()
	for i := range h.Chunks {
		c := &h.Chunks[i]
		c.BlobFile, c.Offset, c.CRC32C = file, off+lay.Rel(i), 0
		if crcs != nil {
			c.CRC32C = crcs[i]
		}
	}
}
