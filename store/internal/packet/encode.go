package packet

import (
	"fmt"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store/internal/bloblog"
)

// Extent is a packet ready to be written: its chunks as they will be
// stored, their layout (Layout.Length is the room it needs) and, when a
// put record leads it, the header that measured that record, which Write
// places and writes.
type Extent struct {
	Desc   *Desc // compacted, normalised and encoded: the chunks to write
	Layout bloblog.Layout
	Model  format.Fingerprint
	ID     format.PacketID

	header *format.PacketHeader // nil: no put record
}

// Encode returns the extent of packet d (checked; chunkLen is what Check
// returned), of model fp and id: its keep-set applied (Compacted), its
// keys rotated to local positions (Normalized), its chunks encoded by its
// codec and laid out, and, when record is set, room made at its start for
// the put record of sequence seq that will lead it. d's buffers are only
// read; the chunks of the extent are d's own where nothing changed them.
func Encode(d *Desc, chunkLen uint64, fp format.Fingerprint, id format.PacketID, seq uint64, record bool) (Extent, error) {
	q, err := d.Compacted().Normalized()
	if err != nil {
		return Extent{}, err
	}
	q, lay, err := encodeChunks(q, chunkLen)
	if err != nil {
		return Extent{}, err
	}
	e := Extent{Desc: q, Layout: lay, Model: fp, ID: id}
	if record {
		if e.header, err = reservePutRecord(q, &e.Layout, fp, id, seq); err != nil {
			return Extent{}, fmt.Errorf("put packet %s: %w", id.Short(), err)
		}
	}
	return e, nil
}

// reservePutRecord makes room at the start of the extent laid out as lay
// for the put record (format/put_record.go) that will lead it, and returns
// the header that measured it. The record's length does not depend on the
// values of the CRCs, offsets and lengths it holds, so the header placed
// at a stand-in position measures it; Write places it for real.
func reservePutRecord(d *Desc, lay *bloblog.Layout, fp format.Fingerprint, id format.PacketID, seq uint64) (*format.PacketHeader, error) {
	if err := lay.SetPrefix(format.ChunkAlignment); err != nil {
		return nil, err
	}
	h := newHeader(d, fp, id, lay)
	place(h, 1, format.BlobHeaderSize, lay, nil)
	rec, err := format.EncodePutRecord(seq, h, d.Model)
	if err != nil {
		return nil, err
	}
	return h, lay.SetPrefix(uint64(len(rec)))
}
