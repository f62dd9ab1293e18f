package store

import (
	"fmt"

	"github.com/kvstore/kvstore/format"
)

// The catalog's blob file records and sequence are format.KindBlobFile and
// format.KindSequence (format/blobrec.go draws them).

// BlobFileInfo is the catalog's accounting of one blob file.
type BlobFileInfo struct {
	Num  uint32
	Path string // not stored: derived from Num
	// Size is where the next extent goes: the end of the last catalogued
	// extent. It never decreases. Bytes past it are not referenced.
	Size        uint64
	LiveBytes   uint64 // bytes of extents whose packets are catalogued
	DeadBytes   uint64 // bytes of extents whose packets were deleted
	Extents     uint32 // extents ever catalogued in the file
	LiveExtents uint32
	Sealed      bool // no extent will be appended
	Views       int  // not stored: views holding the file now
}

// encodeBlobRecord returns the framed catalog value of r.
func encodeBlobRecord(r *BlobFileInfo) []byte {
	return format.EncodeBlobFileRecord(&format.BlobFileRecord{
		Size: r.Size, LiveBytes: r.LiveBytes, DeadBytes: r.DeadBytes,
		Extents: r.Extents, LiveExtents: r.LiveExtents, Sealed: r.Sealed,
	})
}

// decodeBlobRecord parses the record of blob file num.
func decodeBlobRecord(num uint32, v []byte) (BlobFileInfo, error) {
	d, err := format.DecodeBlobFileRecord(v)
	r := BlobFileInfo{Num: num, Size: d.Size, LiveBytes: d.LiveBytes, DeadBytes: d.DeadBytes,
		Extents: d.Extents, LiveExtents: d.LiveExtents, Sealed: d.Sealed}
	if err != nil {
		return r, fmt.Errorf("blob file %06d: %w", num, err)
	}
	return r, nil
}

// encodeSequence returns the framed catalog value of a counter.
func encodeSequence(n uint32) []byte { return format.EncodeSequence(n) }

// decodeSequence parses a counter.
func decodeSequence(v []byte) (uint32, error) { return format.DecodeSequence(v) }
