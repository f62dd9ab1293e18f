package maint

import (
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store/internal/catalog"
)

// ExtentRef is one catalogued extent: a packet's (Header set) or a span
// memory's (Span set). Verify, Check, Compact and GC all walk the catalog
// through it, so that every kind of extent is accounted for the same way.
type ExtentRef struct {
	File      uint32
	Offset    uint64
	Length    uint64
	Namespace string
	ID        [32]byte // what the extent's trailer names: packet or context id
	Context   string   // span memory name; "" for a packet
	Header    *format.PacketHeader
	Span      *format.SpanMeta
}

// End is the offset just past the extent.
func (r *ExtentRef) End() uint64 { return r.Offset + r.Length }

// What names the extent's owner for findings and errors.
func (r *ExtentRef) What() string {
	if r.Span != nil {
		return fmt.Sprintf("span memory %q in namespace %q", r.Context, r.Namespace)
	}
	return fmt.Sprintf("packet %s in namespace %q", format.PacketID(r.ID).Short(), r.Namespace)
}

// BadRecord is a catalog value that did not decode.
type BadRecord struct {
	Key []byte
	Err error
}

// WalkRefs calls fn with every catalogued extent visible to rd (the
// catalog, or a snapshot of it), packets first, then span memories. A
// record that does not decode is passed to bad and the walk goes on; an
// error of fn or of the iterator stops it.
func WalkRefs(rd pebble.Reader, fn func(*ExtentRef) error, bad func(BadRecord)) error {
	err := catalog.Iterate(rd, []byte{catalog.TagHeader}, func(k, v []byte) error {
		h, err := format.DecodeHeader(v)
		if err == nil && !equalKey(k, catalog.HeaderKey(h.Namespace, h.ID)) {
			err = fmt.Errorf("%w: header of packet %s in namespace %q under another key", format.ErrCorruption, h.ID.Short(), h.Namespace)
		}
		if err != nil {
			bad(BadRecord{append([]byte(nil), k...), err})
			return nil
		}
		return fn(&ExtentRef{File: h.BlobFile, Offset: h.ExtentOffset, Length: h.ExtentLength,
			Namespace: h.Namespace, ID: h.ID, Header: h})
	})
	if err != nil {
		return err
	}
	return catalog.Iterate(rd, []byte{catalog.TagSpanMeta}, func(k, v []byte) error {
		ns, name, ok := catalog.ParseSpanMetaKey(k)
		m, err := format.DecodeSpanMeta(v)
		if err == nil && (!ok || m.Context != format.ComputeContextID(ns, m.Model, name)) {
			err = fmt.Errorf("%w: span memory record under a key that does not name its context", format.ErrCorruption)
		}
		if err != nil {
			bad(BadRecord{append([]byte(nil), k...), err})
			return nil
		}
		return fn(&ExtentRef{File: m.BlobFile, Offset: m.ExtentOffset, Length: m.ExtentLength,
			Namespace: ns, ID: m.Context, Context: name, Span: m})
	})
}

func equalKey(a, b []byte) bool { return string(a) == string(b) }

// LoadRecords reads every blob file record of rd. Records that do not
// decode go to bad.
func LoadRecords(rd pebble.Reader, bad func(BadRecord)) (map[uint32]catalog.BlobFile, error) {
	recs := map[uint32]catalog.BlobFile{}
	err := catalog.Iterate(rd, []byte{catalog.TagBlobFile}, func(k, v []byte) error {
		num, err := catalog.ParseBlobFileKey(k)
		var r catalog.BlobFile
		if err == nil {
			r, err = catalog.DecodeBlobFile(num, v)
		}
		if err != nil {
			bad(BadRecord{append([]byte(nil), k...), err})
			return nil
		}
		recs[num] = r
		return nil
	})
	return recs, err
}
