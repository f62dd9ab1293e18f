package catalog

import (
	"encoding/binary"
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"github.com/kvstore/kvstore/format"
)

// Catalog key tags; the layout is drawn in doc.go and docs/format.md.
const (
	TagHeader        = 'h' // 'h' | ns | id                 -> framed packet header
	TagIndex         = 'i' // 'i' | ns | model | id         -> empty (List index)
	TagModel         = 'm' // 'm' | model                   -> framed model spec
	TagBlobFile      = 'b' // 'b' | num u32 BE              -> framed blob file record
	TagSequence      = 's' // 's' | "next-blob"             -> framed sequence
	TagArtifact      = 'a' // 'a' | name | model            -> framed artifact
	TagArtifactIndex = 'A' // 'A' | model | name            -> empty (ListArtifacts index)
	TagSpanMeta      = 'c' // 'c' | ns | name               -> framed span memory root
	TagSpanHead      = 'C' // 'C' | ns | name | l | h       -> framed span memory head
	TagPin           = 'p' // 'p' | ns | id                 -> empty: pinned
	TagAccess        = 'x' // 'x' | ns | id                 -> framed access statistics
)

// KeyNextBlob holds the number of the next blob file to create.
var KeyNextBlob = []byte{TagSequence, 'n', 'e', 'x', 't', '-', 'b', 'l', 'o', 'b'}

// KeyRecordSeq holds the sequence number the next put record or tombstone
// written to the blob log gets (format.EncodeRecordSeq).
var KeyRecordSeq = []byte{TagSequence, 'n', 'e', 'x', 't', '-', 'r', 'e', 'c', 'o', 'r', 'd'}

// NSPrefix is tag | ns len u16 BE | ns, with room for extra more bytes.
func NSPrefix(tag byte, ns string, extra int) []byte {
	k := make([]byte, 0, 3+len(ns)+extra)
	k = append(k, tag)
	k = binary.BigEndian.AppendUint16(k, uint16(len(ns)))
	return append(k, ns...)
}

// HeaderKey is 'h' | ns | id.
func HeaderKey(ns string, id format.PacketID) []byte {
	return append(NSPrefix(TagHeader, ns, len(id)), id[:]...)
}

// HeaderPrefix covers every header of every namespace.
func HeaderPrefix() []byte { return []byte{TagHeader} }

// IndexPrefix covers the index entries of (ns, model).
func IndexPrefix(ns string, model format.Fingerprint) []byte {
	return append(NSPrefix(TagIndex, ns, len(model)+32), model[:]...)
}

// IndexKey is 'i' | ns | model | id.
func IndexKey(ns string, model format.Fingerprint, id format.PacketID) []byte {
	return append(IndexPrefix(ns, model), id[:]...)
}

// ModelKey is 'm' | fingerprint.
func ModelKey(fp format.Fingerprint) []byte {
	return append([]byte{TagModel}, fp[:]...)
}

// BlobFileKey is 'b' | num u32 BE.
func BlobFileKey(num uint32) []byte {
	return binary.BigEndian.AppendUint32([]byte{TagBlobFile}, num)
}

// ParseBlobFileKey returns the file number of a blob file key.
func ParseBlobFileKey(k []byte) (uint32, error) {
	if len(k) != 5 || k[0] != TagBlobFile {
		return 0, fmt.Errorf("%w: catalog: malformed blob file key %x", format.ErrCorruption, k)
	}
	return binary.BigEndian.Uint32(k[1:]), nil
}

// ArtifactKey is 'a' | name len u16 BE | name | model.
func ArtifactKey(model format.Fingerprint, name string) []byte {
	return append(NSPrefix(TagArtifact, name, len(model)), model[:]...)
}

// ArtifactIndexKey is 'A' | model | name.
func ArtifactIndexKey(model format.Fingerprint, name string) []byte {
	k := make([]byte, 0, 1+len(model)+len(name))
	k = append(append(k, TagArtifactIndex), model[:]...)
	return append(k, name...)
}

// SpanMetaKey is 'c' | ns len u16 BE | ns | name len u16 BE | name.
func SpanMetaKey(ns, name string) []byte {
	k := NSPrefix(TagSpanMeta, ns, 2+len(name))
	k = binary.BigEndian.AppendUint16(k, uint16(len(name)))
	return append(k, name...)
}

// SpanHeadKey is 'C' | ns | name (as in SpanMetaKey) | layer u16 BE | head u16 BE.
func SpanHeadKey(ns, name string, layer, head int) []byte {
	k := NSPrefix(TagSpanHead, ns, 6+len(name))
	k = binary.BigEndian.AppendUint16(k, uint16(len(name)))
	k = append(k, name...)
	k = binary.BigEndian.AppendUint16(k, uint16(layer))
	return binary.BigEndian.AppendUint16(k, uint16(head))
}

// PinKey is 'p' | ns | id.
func PinKey(ns string, id format.PacketID) []byte {
	return append(NSPrefix(TagPin, ns, len(id)), id[:]...)
}

// AccessKey is 'x' | ns | id.
func AccessKey(ns string, id format.PacketID) []byte {
	return append(NSPrefix(TagAccess, ns, len(id)), id[:]...)
}

// ParseSpanMetaKey splits 'c' | ns len | ns | name len | name.
func ParseSpanMetaKey(k []byte) (ns, name string, ok bool) {
	ns, rest, ok := SplitLenPrefixed(k[1:])
	if !ok {
		return "", "", false
	}
	name, rest, ok = SplitLenPrefixed(rest)
	return ns, name, ok && len(rest) == 0
}

// SplitLenPrefixed reads a u16 BE length and that many bytes.
func SplitLenPrefixed(b []byte) (string, []byte, bool) {
	if len(b) < 2 {
		return "", nil, false
	}
	n := int(binary.BigEndian.Uint16(b))
	if len(b) < 2+n {
		return "", nil, false
	}
	return string(b[2 : 2+n]), b[2+n:], true
}

// ParseIndexKey splits 'i' | ns len | ns | model (32) | id (32).
func ParseIndexKey(k []byte) (ns string, model format.Fingerprint, id format.PacketID, ok bool) {
	ns, rest, ok := SplitLenPrefixed(k[1:])
	if !ok || len(rest) != len(model)+len(id) {
		return "", model, id, false
	}
	copy(model[:], rest)
	copy(id[:], rest[len(model):])
	return ns, model, id, true
}

// PrefixEnd is the smallest key greater than every key with prefix p, for
// an iterator's upper bound; nil if there is none (p is all 0xff).
func PrefixEnd(p []byte) []byte {
	end := append([]byte(nil), p...)
	for i := len(end) - 1; i >= 0; i-- {
		end[i]++
		if end[i] != 0 {
			return end[:i+1]
		}
	}
	return nil
}

// Iterate calls fn for every key of rd (the catalog, a snapshot or a
// batch) with prefix, in order, until fn returns an error. Keys and values
// are only valid during the call.
func Iterate(rd pebble.Reader, prefix []byte, fn func(k, v []byte) error) error {
	it, err := rd.NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: PrefixEnd(prefix)})
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
