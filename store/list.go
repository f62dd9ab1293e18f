package store

import (
	"fmt"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store/internal/catalog"
)

// List returns up to limit ids of the packets stored in namespace ns for
// model, in id order, starting after cursor (nil: from the first). next is
// the cursor of the following page, nil when there is none. Cursors are
// opaque; one taken before a concurrent Put or Delete still works (pages
// then reflect the catalog at the time each is read).
func (db *DB) List(ns string, model format.Fingerprint, cursor []byte, limit int) (ids []format.PacketID, next []byte, err error) {
	if err := db.enter(); err != nil {
		return nil, nil, err
	}
	defer db.leave()
	if err := checkNamespace(ns); err != nil {
		return nil, nil, err
	}
	if limit <= 0 {
		return nil, nil, fmt.Errorf("%w: list limit %d, want > 0", ErrInvalidArgument, limit)
	}
	prefix := catalog.IndexPrefix(ns, model)
	lower := prefix
	if cursor != nil {
		if len(cursor) != len(format.PacketID{}) {
			return nil, nil, fmt.Errorf("%w: list cursor of %d bytes", ErrInvalidArgument, len(cursor))
		}
		// The smallest key after prefix|cursor is prefix|cursor|0x00.
		lower = append(append(append([]byte(nil), prefix...), cursor...), 0)
	}
	more := false
	err = db.cat.Scan(lower, catalog.PrefixEnd(prefix), func(k, _ []byte) (bool, error) {
		if len(ids) == limit {
			more = true
			return false, nil
		}
		if len(k) != len(prefix)+len(format.PacketID{}) {
			return false, fmt.Errorf("%w: malformed index key %x", ErrCorruption, k)
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

// Headers calls fn with every packet header in the catalog, in key order
// (namespace, then id), stopping at the first error fn returns. A header
// that does not decode stops the walk with ErrCorruption naming its key.
// It is meant for tools (verify, check, stat): the headers are fresh copies.
func (db *DB) Headers(fn func(*format.PacketHeader) error) error {
	if err := db.enter(); err != nil {
		return err
	}
	defer db.leave()
	p := catalog.HeaderPrefix()
	return db.cat.Scan(p, catalog.PrefixEnd(p), func(k, v []byte) (bool, error) {
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
