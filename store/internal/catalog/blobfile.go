package catalog

import (
	"fmt"

	"github.com/kvstore/kvstore/format"
)

// BlobFile is the catalog's accounting of one blob file: the value under
// BlobFileKey(Num), coded as format.KindBlobFile (format/blobrec.go draws
// it), plus two fields derived at run time.
type BlobFile struct {
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

// EncodeBlobFile returns the framed catalog value of r.
func EncodeBlobFile(r *BlobFile) []byte {
	return format.EncodeBlobFileRecord(&format.BlobFileRecord{
		Size: r.Size, LiveBytes: r.LiveBytes, DeadBytes: r.DeadBytes,
		Extents: r.Extents, LiveExtents: r.LiveExtents, Sealed: r.Sealed,
	})
}

// DecodeBlobFile parses the record of blob file num.
func DecodeBlobFile(num uint32, v []byte) (BlobFile, error) {
	d, err := format.DecodeBlobFileRecord(v)
	r := BlobFile{Num: num, Size: d.Size, LiveBytes: d.LiveBytes, DeadBytes: d.DeadBytes,
		Extents: d.Extents, LiveExtents: d.LiveExtents, Sealed: d.Sealed}
	if err != nil {
		return r, fmt.Errorf("blob file %06d: %w", num, err)
	}
	return r, nil
}

// EncodeSequence returns the framed value of KeyNextBlob.
func EncodeSequence(n uint32) []byte { return format.EncodeSequence(n) }

// DecodeSequence parses the value of KeyNextBlob.
func DecodeSequence(v []byte) (uint32, error) { return format.DecodeSequence(v) }

// KillExtent moves n bytes and one extent of r from live to dead (never
// below zero).
func (r *BlobFile) KillExtent(n uint64) {
	n = min(n, r.LiveBytes)
	r.LiveBytes -= n
	r.DeadBytes += n
	if r.LiveExtents > 0 {
		r.LiveExtents--
	}
}
