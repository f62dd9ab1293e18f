package store

import (
	"encoding/binary"
	"fmt"

	"github.com/kvstore/kvstore/format"
)

// Catalog key tags; the layout is drawn in doc.go.
const (
	tagHeader   = 'h'
	tagIndex    = 'i'
	tagModel    = 'm'
	tagBlobFile = 'b'
	tagSequence = 's'
)

// keyNextBlob holds the number of the next blob file to create.
var keyNextBlob = []byte{tagSequence, 'n', 'e', 'x', 't', '-', 'b', 'l', 'o', 'b'}

// checkNamespace refuses namespaces that do not fit the u16 length prefix
// and the format's name limit.
func checkNamespace(ns string) error {
	if len(ns) > format.MaxNameLen {
		return fmt.Errorf("%w: namespace of %d bytes exceeds %d", ErrInvalidArgument, len(ns), format.MaxNameLen)
	}
	return nil
}

// nsPrefix is tag | ns len u16 BE | ns.
func nsPrefix(tag byte, ns string, extra int) []byte {
	k := make([]byte, 0, 3+len(ns)+extra)
	k = append(k, tag)
	k = binary.BigEndian.AppendUint16(k, uint16(len(ns)))
	return append(k, ns...)
}

// headerKey is 'h' | ns | id.
func headerKey(ns string, id format.PacketID) []byte {
	return append(nsPrefix(tagHeader, ns, len(id)), id[:]...)
}

// headerPrefix covers every header of every namespace.
func headerPrefix() []byte { return []byte{tagHeader} }

// indexPrefix covers the index entries of (ns, model).
func indexPrefix(ns string, model format.Fingerprint) []byte {
	return append(nsPrefix(tagIndex, ns, len(model)+32), model[:]...)
}

// indexKey is 'i' | ns | model | id.
func indexKey(ns string, model format.Fingerprint, id format.PacketID) []byte {
	return append(indexPrefix(ns, model), id[:]...)
}

// modelKey is 'm' | fingerprint.
func modelKey(fp format.Fingerprint) []byte {
	return append([]byte{tagModel}, fp[:]...)
}

// blobFileKey is 'b' | num u32 BE.
func blobFileKey(num uint32) []byte {
	return binary.BigEndian.AppendUint32([]byte{tagBlobFile}, num)
}

// parseBlobFileKey returns the file number of a blob file key.
func parseBlobFileKey(k []byte) (uint32, error) {
	if len(k) != 5 || k[0] != tagBlobFile {
		return 0, fmt.Errorf("%w: catalog: malformed blob file key %x", ErrCorruption, k)
	}
	return binary.BigEndian.Uint32(k[1:]), nil
}

// prefixEnd is the smallest key greater than every key with prefix p, for
// an iterator's upper bound; nil if there is none (p is all 0xff).
func prefixEnd(p []byte) []byte {
	end := append([]byte(nil), p...)
	for i := len(end) - 1; i >= 0; i-- {
		end[i]++
		if end[i] != 0 {
			return end[:i+1]
		}
	}
	return nil
}
