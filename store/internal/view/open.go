package view

import (
	"fmt"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store/internal/bloblog"
)

// Open is the view of the packet whose header lookup returns, in its blob
// file as file pins it (a new reference, or nil when the file is not
// registered). A file retired between the lookup and the pin is looked up
// again, attempts times in all (compaction repoints the header first, so
// another lookup finds the new place); then it is ErrCorruption. A lookup's
// error is returned as is.
func Open(attempts int, header func() (*format.PacketHeader, error), file func(num uint32) *bloblog.File, o Options) (*View, error) {
	var id format.PacketID
	for range attempts {
		h, err := header()
		if err != nil {
			return nil, err
		}
		id = h.ID
		f := file(h.BlobFile)
		if f == nil {
			continue
		}
		v, err := New(h, f, o)
		if err != nil {
			f.Release()
			return nil, err
		}
		return v, nil
	}
	return nil, fmt.Errorf("%w: packet %s: blob file missing from the catalog", ErrCorruption, id.Short())
}
