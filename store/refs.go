package store

import (
	"encoding/binary"
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"github.com/kvstore/kvstore/format"
)

// extentRef is one catalogued extent: a packet's (Header set) or a span
// memory's (Span set). Verify, Check, Compact and GC all walk the catalog
// through it, so that every kind of extent is accounted for the same way.
type extentRef struct {
	File      uint32
	Offset    uint64
	Length    uint64
	Namespace string
	ID        [32]byte // what the extent's trailer names: packet or context id
	Context   string   // span memory name; "" for a packet
	Header    *format.PacketHeader
	Span      *SpanMeta
}

func (r *extentRef) end() uint64 { return r.Offset + r.Length }

// what names the extent's owner for findings and errors.
func (r *extentRef) what() string {
	if r.Span != nil {
		return fmt.Sprintf("span memory %q in namespace %q", r.Context, r.Namespace)
	}
	return fmt.Sprintf("packet %s in namespace %q", format.PacketID(r.ID).Short(), r.Namespace)
}

// badRecord is a catalog value that did not decode.
type badRecord struct {
	Key []byte
	Err error
}

// walkRefs calls fn with every catalogued extent visible to rd (the
// catalog, or a snapshot of it), packets first, then span memories. A
// record that does not decode is passed to bad and the walk goes on; an
// error of fn or of the iterator stops it.
func walkRefs(rd pebble.Reader, fn func(*extentRef) error, bad func(badRecord)) error {
	err := iterate(rd, []byte{tagHeader}, func(k, v []byte) error {
		h, err := format.DecodeHeader(v)
		if err == nil && !equalKey(k, headerKey(h.Namespace, h.ID)) {
			err = fmt.Errorf("%w: header of packet %s in namespace %q under another key", ErrCorruption, h.ID.Short(), h.Namespace)
		}
		if err != nil {
			bad(badRecord{append([]byte(nil), k...), err})
			return nil
		}
		return fn(&extentRef{File: h.BlobFile, Offset: h.ExtentOffset, Length: h.ExtentLength,
			Namespace: h.Namespace, ID: h.ID, Header: h})
	})
	if err != nil {
		return err
	}
	return iterate(rd, []byte{tagSpanMeta}, func(k, v []byte) error {
		ns, name, ok := parseSpanMetaKey(k)
		m, err := decodeSpanMeta(v)
		if err == nil && (!ok || m.Context != ComputeContextID(ns, m.Model, name)) {
			err = fmt.Errorf("%w: span memory record under a key that does not name its context", ErrCorruption)
		}
		if err != nil {
			bad(badRecord{append([]byte(nil), k...), err})
			return nil
		}
		return fn(&extentRef{File: m.BlobFile, Offset: m.ExtentOffset, Length: m.ExtentLength,
			Namespace: ns, ID: m.Context, Context: name, Span: m})
	})
}

// iterate calls fn with every key of rd starting with prefix, in order.
func iterate(rd pebble.Reader, prefix []byte, fn func(k, v []byte) error) error {
	it, err := rd.NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: prefixEnd(prefix)})
	if err != nil {
		return fmt.Errorf("store: catalog scan: %w", err)
	}
	for ok := it.First(); ok; ok = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			break
		}
		if err := fn(it.Key(), v); err != nil {
			_ = it.Close()
			return err
		}
	}
	if err := it.Close(); err != nil {
		return fmt.Errorf("store: catalog scan: %w", err)
	}
	return nil
}

// parseSpanMetaKey splits 'c' | ns len | ns | name len | name.
func parseSpanMetaKey(k []byte) (ns, name string, ok bool) {
	ns, rest, ok := splitLenPrefixed(k[1:])
	if !ok {
		return "", "", false
	}
	name, rest, ok = splitLenPrefixed(rest)
	return ns, name, ok && len(rest) == 0
}

// splitLenPrefixed reads a u16 BE length and that many bytes.
func splitLenPrefixed(b []byte) (string, []byte, bool) {
	if len(b) < 2 {
		return "", nil, false
	}
	n := int(binary.BigEndian.Uint16(b))
	if len(b) < 2+n {
		return "", nil, false
	}
	return string(b[2 : 2+n]), b[2+n:], true
}

// parseIndexKey splits 'i' | ns len | ns | model (32) | id (32).
func parseIndexKey(k []byte) (ns string, model format.Fingerprint, id format.PacketID, ok bool) {
	ns, rest, ok := splitLenPrefixed(k[1:])
	if !ok || len(rest) != len(model)+len(id) {
		return "", model, id, false
	}
	copy(model[:], rest)
	copy(id[:], rest[len(model):])
	return ns, model, id, true
}

func equalKey(a, b []byte) bool { return string(a) == string(b) }

// loadRecords reads every blob file record of rd. Records that do not
// decode go to bad.
func loadRecords(rd pebble.Reader, bad func(badRecord)) (map[uint32]BlobFileInfo, error) {
	recs := map[uint32]BlobFileInfo{}
	err := iterate(rd, []byte{tagBlobFile}, func(k, v []byte) error {
		num, err := parseBlobFileKey(k)
		var r BlobFileInfo
		if err == nil {
			r, err = decodeBlobRecord(num, v)
		}
		if err != nil {
			bad(badRecord{append([]byte(nil), k...), err})
			return nil
		}
		recs[num] = r
		return nil
	})
	return recs, err
}
