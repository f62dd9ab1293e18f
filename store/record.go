package store

import "github.com/kvstore/kvstore/store/internal/catalog"

// The catalog's blob file records and sequence are format.KindBlobFile and
// format.KindSequence (format/blobrec.go draws them); store/internal/catalog
// codes them.

// blobRecord is the catalog's accounting of one blob file, as the store
// keeps it (BlobFileInfo is the public copy).
type blobRecord = catalog.BlobFile

// BlobFileInfo is the catalog's accounting of one blob file.
type BlobFileInfo struct {
	// Num is the file's number, Path its path (derived from Num).
	Num  uint32
	Path string
	// Size is where the next extent goes: the end of the last catalogued
	// extent. It never decreases. Bytes past it are not referenced.
	Size uint64
	// LiveBytes is the bytes of extents whose packets (or span memories)
	// are catalogued; DeadBytes those of extents deleted or replaced.
	LiveBytes uint64
	DeadBytes uint64
	// Extents is the extents ever catalogued in the file, LiveExtents
	// those still live.
	Extents     uint32
	LiveExtents uint32
	// Sealed: no extent will be appended.
	Sealed bool
	// Views is the views (and span readers) holding the file now.
	Views int
}

// fromBlobRecord is the catalog's record as the public one (the same
// fields).
func fromBlobRecord(r blobRecord) BlobFileInfo { return BlobFileInfo(r) }

// encodeBlobRecord returns the framed catalog value of r.
func encodeBlobRecord(r *blobRecord) []byte { return catalog.EncodeBlobFile(r) }

// decodeBlobRecord parses the record of blob file num.
func decodeBlobRecord(num uint32, v []byte) (blobRecord, error) {
	return catalog.DecodeBlobFile(num, v)
}

// encodeSequence returns the framed catalog value of a counter.
func encodeSequence(n uint32) []byte { return catalog.EncodeSequence(n) }

// decodeSequence parses a counter.
func decodeSequence(v []byte) (uint32, error) { return catalog.DecodeSequence(v) }
