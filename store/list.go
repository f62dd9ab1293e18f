package store

import "github.com/kvstore/kvstore/format"

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
	if err := format.CheckNamespace(ns); err != nil {
		return nil, nil, err
	}
	return db.cat.List(ns, model, cursor, limit)
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
	return db.cat.Headers(fn)
}
