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
// and pin state (pins are durable: 'p' | ns | id -> empty), from which
// Candidates lists the unpinned packets in LRU or LFU order and Plan says
// how many of them a write of so many bytes must evict.
//
// The package reads the catalog it is given and writes only the batch it
// is given; the store owns locking (entries' size, model and pin state
// change under its writer lock) and the eviction itself.
package access
