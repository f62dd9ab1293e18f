package spanmem

import (
	"encoding/binary"

	"github.com/zeebo/blake3"

	"github.com/kvstore/kvstore/format"
)

// ContextID derives a span memory's id: BLAKE3-256 over a domain tag,
// (namespace, model fingerprint, context name). Variable-length fields are
// length-prefixed so that no two inputs share an encoding.
func ContextID(ns string, model format.Fingerprint, name string) format.ContextID {
	h := blake3.New()
	var n [8]byte
	put := func(b []byte) {
		binary.LittleEndian.PutUint64(n[:], uint64(len(b)))
		h.Write(n[:])
		h.Write(b)
	}
	h.Write([]byte("kvstore.spans.v1"))
	put([]byte(ns))
	h.Write(model[:])
	put([]byte(name))
	var id format.ContextID
	copy(id[:], h.Sum(nil))
	return id
}
