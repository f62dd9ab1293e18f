package store

import "github.com/kvstore/kvstore/store/internal/catalog"

// The catalog's blob file records and sequence are format.KindBlobFile and
// format.KindSequence (format/blobrec.go draws them); store/internal/catalog
// codes them.

// BlobFileInfo is the catalog's accounting of one blob file.
type BlobFileInfo = catalog.BlobFile

// encodeBlobRecord returns the framed catalog value of r.
func encodeBlobRecord(r *BlobFileInfo) []byte { return catalog.EncodeBlobFile(r) }

// decodeBlobRecord parses the record of blob file num.
func decodeBlobRecord(num uint32, v []byte) (BlobFileInfo, error) {
	return catalog.DecodeBlobFile(num, v)
}

// encodeSequence returns the framed catalog value of a counter.
func encodeSequence(n uint32) []byte { return catalog.EncodeSequence(n) }

// decodeSequence parses a counter.
func decodeSequence(v []byte) (uint32, error) { return catalog.DecodeSequence(v) }
