// Package access keeps the store's access statistics, eviction's ordering
// hints: per packet, when it was last used and how often, in a sharded
// in-memory Table whose counters are atomic, so that a Get costs no write.
// The table is saved lazily, in unsynced batches (Table.Flush), under
//
//	'x' | ns len u16 BE | ns | packet id (32) -> framed "KVAC": last use unix ns i64 LE | uses u64 LE
//
// (format/access.go codes the value; docs/format.md draws it). Losing it
// in a crash loses only ordering hints, never data. Once loaded
// (Table.Load) the table also holds every catalogued packet's extent size
// and pin state (pins are durable: 'p' | ns | id -> empty, written by
// SetPin, read by Pinned, pin.go), from which
// Candidates lists the unpinned packets in LRU or LFU order, Plan says
// how many of them a write of so many bytes must evict, and Room does both
// (failing with ErrNoSpace when no eviction makes room). Evictor.Evict
// deletes them as Delete does: a tombstone each (format/tombstone.go),
// appended in one write and synced through the store, then one batch
// (committed behind the synced tombstones, as Delete's) with their headers, index entries, access and pin records
// (DeleteKeys) and their extents killed in the blob file records; so a
// rebuilt catalog (store.Recover) keeps them evicted.
//
// The package reads the catalog it is given and writes the batches it is
// given or builds; Evictor reads headers and blob file records, and
// appends and commits, through the functions the store gives it. The store owns
// locking (entries' size, model and pin state change under its writer
// lock) and installs what an eviction returns.
package access
