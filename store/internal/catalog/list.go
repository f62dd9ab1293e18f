package catalog

import (
	"fmt"

	"github.com/kvstore/kvstore/format"
)

// List returns up to limit ids under the List index of namespace ns and
// model ('i' keys), in id order, starting after cursor (nil: from the
// first). next is the cursor of the following page, nil when there is none:
// the last id returned, so that a cursor taken before a concurrent change
// still works. A limit <= 0 or a cursor that is not an id's length is
// ErrInvalidArgument; an index key of the wrong length ErrCorruption.
func (c *Catalog) List(ns string, model format.Fingerprint, cursor []byte, limit int) (ids []format.PacketID, next []byte, err error) {
	if limit <= 0 {
		return nil, nil, fmt.Errorf("%w: list limit %d, want > 0", format.ErrInvalidArgument, limit)
	}
	prefix := IndexPrefix(ns, model)
	lower := prefix
	if cursor != nil {
		if len(cursor) != len(format.PacketID{}) {
			return nil, nil, fmt.Errorf("%w: list cursor of %d bytes", format.ErrInvalidArgument, len(cursor))
		}
		// The smallest key after prefix|cursor is prefix|cursor|0x00.
		lower = append(append(append([]byte(nil), prefix...), cursor...), 0)
	}
	more := false
	err = c.Scan(lower, PrefixEnd(prefix), func(k, _ []byte) (bool, error) {
		if len(ids) == limit {
			more = true
			return false, nil
		}
		if len(k) != len(prefix)+len(format.PacketID{}) {
			return false, fmt.Errorf("%w: malformed index key %x", format.ErrCorruption, k)
		}
		ids = append(ids, format.PacketID(k[len(prefix):]))
		return true, nil
	})
	if err != nil {
		return nil, nil, err
	}
	if more {
		last := ids[len(ids)-1]
		next = last[:]
	}
	return ids, next, nil
}

// Headers calls fn with every packet header ('h' keys), in key order
// (namespace, then id), stopping at the first error fn returns. A header
// that does not decode stops the walk with ErrCorruption naming its key.
// The headers are fresh copies.
func (c *Catalog) Headers(fn func(*format.PacketHeader) error) error {
	p := HeaderPrefix()
	return c.Scan(p, PrefixEnd(p), func(k, v []byte) (bool, error) {
		h, err := format.DecodeHeader(v)
		if err != nil {
			return false, fmt.Errorf("store: header under key %x: %w", k, err)
		}
		if err := fn(h); err != nil {
			return false, err
		}
		return true, nil
	})
}
