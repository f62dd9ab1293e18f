package recovery

import (
	"errors"
	"testing"

	"github.com/cockroachdb/pebble/v2"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store/internal/catalog"
)

// TestFiles: Files returns the blob file records in file number order and
// the next file number (1 for an empty catalog); a catalogued file at or
// past the next number, or without one, is ErrCorruption.
func TestFiles(t *testing.T) {
	f := newFixture(t)
	recs, next, err := Files(f.cat)
	if err != nil || len(recs) != 0 || next != 1 {
		t.Fatalf("empty catalog: %d records, next %d, %v; want none, 1", len(recs), next, err)
	}
	set := func(k, v []byte) {
		t.Helper()
		b := f.cat.DB.NewBatch()
		defer b.Close()
		_ = b.Set(k, v, nil)
		if err := b.Commit(pebble.Sync); err != nil {
			t.Fatal(err)
		}
	}
	for _, num := range []uint32{12, 3} {
		r := catalog.BlobFile{Num: num, Size: format.BlobHeaderSize + 4096, LiveBytes: 4096, Extents: 1, LiveExtents: 1, Sealed: num == 3}
		set(catalog.BlobFileKey(num), catalog.EncodeBlobFile(&r))
	}
	if _, _, err := Files(f.cat); !errors.Is(err, format.ErrCorruption) {
		t.Errorf("files without a next number: %v, want ErrCorruption", err)
	}
	set(catalog.KeyNextBlob, catalog.EncodeSequence(12))
	if _, _, err := Files(f.cat); !errors.Is(err, format.ErrCorruption) {
		t.Errorf("next number 12 with file 12 catalogued: %v, want ErrCorruption", err)
	}
	set(catalog.KeyNextBlob, catalog.EncodeSequence(13))
	recs, next, err = Files(f.cat)
	if err != nil || next != 13 || len(recs) != 2 || recs[0].Num != 3 || !recs[0].Sealed || recs[1].Num != 12 || recs[1].LiveBytes != 4096 {
		t.Errorf("Files = %+v, next %d, %v; want files 3 (sealed) and 12, next 13", recs, next, err)
	}
	set(catalog.BlobFileKey(5), []byte{1, 2, 3})
	if _, _, err := Files(f.cat); !errors.Is(err, format.ErrCorruption) {
		t.Errorf("a record that does not decode: %v, want ErrCorruption", err)
	}
}
