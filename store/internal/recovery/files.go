package recovery

import (
	"fmt"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store/internal/catalog"
)

// Files reads, for Open once the catalog is reconciled, the catalogued
// blob file records in file number order and the next blob file number
// (1 when none is catalogued). A catalogued file at or past the next
// number, or files catalogued without a next number, is ErrCorruption.
func Files(cat *catalog.Catalog) ([]catalog.BlobFile, uint32, error) {
	var recs []catalog.BlobFile
	p := []byte{catalog.TagBlobFile}
	err := cat.Scan(p, catalog.PrefixEnd(p), func(k, v []byte) (bool, error) {
		num, err := catalog.ParseBlobFileKey(k)
		if err != nil {
			return false, err
		}
		r, err := catalog.DecodeBlobFile(num, v)
		if err != nil {
			return false, err
		}
		recs = append(recs, r)
		return true, nil
	})
	if err != nil {
		return nil, 0, fmt.Errorf("store: load blob file records: %w", err)
	}
	next := uint32(1)
	found, err := cat.Get(catalog.KeyNextBlob, func(v []byte) (err error) {
		next, err = catalog.DecodeSequence(v)
		return err
	})
	if err != nil {
		return nil, 0, fmt.Errorf("store: load next blob file number: %w", err)
	}
	if len(recs) > 0 {
		if last := recs[len(recs)-1].Num; !found || next <= last {
			return nil, 0, fmt.Errorf("%w: catalog: next blob file number %d, but file %06d is catalogued", format.ErrCorruption, next, last)
		}
	}
	return recs, next, nil
}
