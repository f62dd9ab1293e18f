package store

import (
	"errors"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store/internal/access"
)

// Access statistics are eviction's ordering hints: per packet, when it
// was last used and how often, kept by store/internal/access (which draws
// their catalog record). A Get costs no write. The table is saved lazily,
// in unsynced batches, at Close and every Options.AccessFlushInterval
// (from the write path). Losing them in a crash loses only ordering
// hints, never data. Pins, on the other hand, are durable (capacity.go).

// accessTable holds the access statistics (and, once loaded, every
// packet's size and pin state for eviction).
type accessTable = access.Table

// touch records a use of packet (ns, id): Get calls it on every hit.
func (db *DB) touch(ns string, id format.PacketID) { db.ops.access.Touch(access.Key{NS: ns, ID: id}) }

// touchNew records a packet just stored (writer lock held).
func (db *DB) touchNew(h *format.PacketHeader) {
	db.ops.access.Stored(h)
	db.maybeFlushAccess()
}

// forget drops a removed packet's statistics (writer lock held).
func (db *DB) forget(ns string, id format.PacketID) { db.ops.access.Remove(access.Key{NS: ns, ID: id}) }

// deleteOpsKeys adds to b the removal of a packet's access and pin
// records, for the batch that deletes it.
func deleteOpsKeys(b *pebble.Batch, ns string, id format.PacketID) { access.DeleteKeys(b, ns, id) }

// maybeFlushAccess saves the statistics if the flush interval has passed
// (writer lock held).
func (db *DB) maybeFlushAccess() {
	if !db.ops.access.Due(db.opts.AccessFlushInterval) {
		return
	}
	// A catalog busy flushing is no failure: the next interval saves them.
	if err := db.flushAccess(0); err != nil && !errors.Is(err, errCatalogBusy) {
		db.log.Warn("store: saving access statistics", "dir", db.dir, "err", err)
	}
}

// flushAccess writes the changed statistics of packets still catalogued
// in unsynced batches (access.Table.Save), each once the catalog can take
// it without stalling, waiting up to wait for that (catalogReady); what it
// cannot write stays for a later save. The caller holds the writer lock,
// or the DB is closing.
func (db *DB) flushAccess(wait time.Duration) error {
	if db.opts.ReadOnly || db.failed != nil {
		db.ops.access.LastFlush = time.Now()
		return nil
	}
	return db.ops.access.Save(db.cat, accessBatchBytes(db.opts.CatalogMemTableSize), func(n int) error {
		return db.catalogReady(uint64(n), wait)
	})
}

func decodeAccess(v []byte) (last int64, uses uint64, err error) { return format.DecodeAccess(v) }
