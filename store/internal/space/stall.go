package space

import "github.com/cockroachdb/pebble/v2"

// l0StopWrites is Pebble's default L0StopWritesThreshold: with this many
// level-0 sublevels it stalls writes until a compaction ends.
const l0StopWrites = 12

// CatalogBusy reports whether a commit of a batch of n bytes to a catalog
// with memtables of memTable bytes, whose Pebble metrics are m, could wait
// on a write stall. Pebble stalls a commit that needs a new memtable while
// the memtables it holds reach twice the memtable size (they wait on a
// flush, which on a full disk fails and is retried forever), or while
// level 0 has l0StopWrites sublevels. The test is conservative: the
// memtable the batch would go to may have room for it.
func CatalogBusy(m *pebble.Metrics, memTable, n uint64) bool {
	return m.MemTable.Size+n >= 2*memTable || m.Levels[0].Sublevels >= l0StopWrites-1
}
