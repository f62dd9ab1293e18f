package store

import (
	"sync"

	"github.com/kvstore/kvstore/store/internal/bloblog"
	"github.com/kvstore/kvstore/store/internal/events"
)

// opsState is the DB's state for the operations side: blob files retired
// by compaction or GC but still mapped by views, and (in their own files)
// access statistics, pins and event subscribers.
type opsState struct {
	mu sync.Mutex
	// retiring holds files dropped from the catalog whose removal waits for
	// views: GC must not take them for orphans.
	retiring map[uint32]*bloblog.File

	events events.Hub[Event]
	access accessTable
}

// retire drops blob file num from the registry and has it removed once no
// view maps it. The catalog must no longer reference it. Writers only.
func (db *DB) retire(num uint32) {
	db.filesMu.RLock()
	f := db.files[num]
	db.filesMu.RUnlock()
	if f == nil {
		return
	}
	f.MarkObsolete()
	db.ops.mu.Lock()
	if db.ops.retiring == nil {
		db.ops.retiring = map[uint32]*bloblog.File{}
	}
	db.ops.retiring[num] = f
	db.ops.mu.Unlock()
	db.dropFile(num)
}

// isRetiring reports whether blob file num is retired but still mapped;
// it forgets files whose last view has gone (and which are removed).
func (db *DB) isRetiring(num uint32) bool {
	db.ops.mu.Lock()
	defer db.ops.mu.Unlock()
	f := db.ops.retiring[num]
	if f == nil {
		return false
	}
	if f.Referenced() {
		return true
	}
	delete(db.ops.retiring, num)
	return false
}
