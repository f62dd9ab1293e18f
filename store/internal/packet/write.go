package packet

import (
	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store/internal/bloblog"
)

// Write writes e's extent at the end of the active blob file a (fd: its
// OS descriptor, see bloblog.WriteExtent), led by its put record of
// sequence seq when Encode made room for one, and returns the header that
// describes it. It neither syncs the file nor catalogues the header: the
// caller does both, and abandons the bytes on an error.
func Write(a *bloblog.Active, fd uintptr, e *Extent, seq uint64) (*format.PacketHeader, error) {
	off := a.End
	h := e.header
	lead := func(crcs []uint32) ([]byte, error) {
		place(h, a.Num, off, &e.Layout, crcs)
		return format.EncodePutRecord(seq, h, e.Desc.Model)
	}
	crcs, err := bloblog.WriteExtent(a.F, fd, a.Path, off, &e.Layout, e.Desc.Chunk, lead, e.ID)
	if err != nil {
		return nil, err
	}
	if h == nil { // no put record
		h = newHeader(e.Desc, e.Model, e.ID, &e.Layout)
		place(h, a.Num, off, &e.Layout, crcs)
	}
	return h, nil
}
