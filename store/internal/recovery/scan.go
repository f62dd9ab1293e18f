package recovery

import (
	"encoding/binary"
	"fmt"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store/internal/bloblog"
	"github.com/kvstore/kvstore/store/internal/catalog"
)

// tailRecord is one put record or tombstone found in a blob file's tail.
type tailRecord struct {
	num       uint32
	off, n    uint64
	seq       uint64
	put       *format.PacketHeader // repointed to where the extent is
	spec      *format.ModelSpec
	tomb      *format.Tombstone
	applied   bool // changed the catalog (its end counts)
	duplicate bool
}

func (t *tailRecord) key() string {
	if t.put != nil {
		return string(catalog.HeaderKey(t.put.Namespace, t.put.ID))
	}
	return string(catalog.HeaderKey(t.tomb.Namespace, t.tomb.ID))
}

// scanNew scans a blob file the catalog does not know, from its header.
func (p *Plan) scanNew(num uint32, size uint64) error {
	fs := p.s.FS
	path := fs.PathJoin(p.s.Dir, bloblog.FileName(num))
	f, err := fs.Open(path)
	if err != nil {
		return fmt.Errorf("store: reconcile: open %s: %w", path, err)
	}
	hdr := make([]byte, format.BlobHeaderSize)
	n, _ := f.ReadAt(hdr, 0)
	_ = f.Close()
	if n < len(hdr) {
		return nil // created, never written to: nothing in it was acknowledged
	}
	if got, err := format.DecodeBlobHeader(hdr); err != nil || got != num {
		p.problem("blob file %s: header: %v (file %06d): not scanned", path, err, got)
		return nil
	}
	return p.scan(num, format.BlobHeaderSize, size)
}

// scan reads the whole extents of file num in [from, size).
func (p *Plan) scan(num uint32, from, size uint64) error {
	fs := p.s.FS
	path := fs.PathJoin(p.s.Dir, bloblog.FileName(num))
	f, err := fs.Open(path)
	if err != nil {
		return fmt.Errorf("store: reconcile: open %s: %w", path, err)
	}
	defer f.Close()
	end, err := bloblog.Scan(f, path, from, size, func(e *bloblog.Scanned) error {
		p.Report.Scanned++
		p.classify(num, path, e)
		return nil
	})
	if err != nil {
		return fmt.Errorf("store: reconcile: %w", err)
	}
	p.Report.TornBytes += size - end
	return nil
}

// classify decodes the record leading (or making) extent e.
func (p *Plan) classify(num uint32, path string, e *bloblog.Scanned) {
	t := &tailRecord{num: num, off: e.Offset, n: e.Length}
	kind, ok := format.KindOf(e.Payload)
	switch {
	case ok && kind.Magic == format.KindPutRecord.Magic:
		r, err := format.DecodePutRecord(framed(e.Payload))
		if err != nil {
			p.problem("%s at %d: %v", path, e.Offset, err)
			return
		}
		if r.Header.ID != e.Trailer.Packet || r.Header.ExtentLength != e.Length {
			p.problem("%s at %d: put record of %s does not describe its extent", path, e.Offset, r.Header.ID.Short())
			return
		}
		t.seq, t.put, t.spec = r.Seq, r.Header.Moved(num, e.Offset), r.Spec
	case ok && kind.Magic == format.KindTombstone.Magic:
		ts, err := format.DecodeTombstone(e.Payload)
		if err != nil || ts.ID != e.Trailer.Packet {
			p.problem("%s at %d: tombstone: %v", path, e.Offset, err)
			return
		}
		t.seq, t.tomb = ts.Seq, ts
	default:
		p.Report.NoRecord++
		return
	}
	if t.seq < p.seq {
		if t.put != nil {
			p.stale = append(p.stale, t)
		}
		p.Report.Stale++
		return
	}
	p.records = append(p.records, t)
}

// framed returns the framed record at the start of b, cut to its length
// (Unseal then checks it).
func framed(b []byte) []byte {
	if len(b) < format.FrameSize {
		return b
	}
	n := uint64(binary.LittleEndian.Uint32(b[8:])) + format.FrameSize
	return b[:min(n, uint64(len(b)))]
}
