package maint

import (
	"github.com/cockroachdb/pebble/v2"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store/internal/catalog"
)

// Writer is the store as the maintenance that changes it (Compact, GC)
// sees it, the writer lock held throughout: what it reads (Store), the
// registry it installs what it committed into, the catalog commit, and
// the next blob file number. The store builds one per call and takes back
// Next when it returns.
type Writer struct {
	*Store
	Registry Registry
	// Commit commits a batch durably (the store counts and times it, and
	// remembers a catalog failure).
	Commit func(b *pebble.Batch) error
	// Next is the next blob file number: outputs take Next, Next+1, ...,
	// and it moves past each group's outputs once they are committed.
	Next uint32
	// FileSize is the seal size of an output file.
	FileSize uint64
	// Compacted, if not nil, is called after each compaction group
	// commits, with what it did and the headers of the packets it moved.
	Compacted func(rep *CompactReport, moved []*format.PacketHeader)
	// Fits, if not nil, reports whether the disk has room to copy n bytes
	// (a compaction group's live bytes) and keep what the store keeps
	// free for its catalog, and what is free. A group that does not fit
	// is skipped, with the reason: on a nearly full disk, compaction
	// rewrites what it can and never takes the catalog's room.
	Fits func(n uint64) (free uint64, ok bool)
	// DropActive is called when GC drops the active file's record (it has
	// no live extent and is gone from disk): the next write must start a
	// new file.
	DropActive func()
}

// Registry is the store's registry of catalogued blob files as the
// maintenance that changes them sees it.
type Registry interface {
	// Records are every catalogued blob file's record, in number order.
	Records() []catalog.BlobFile
	// Add registers a new blob file, before the batch that catalogues it
	// commits (so that readers find it once it does).
	Add(r catalog.BlobFile)
	// Drop unregisters a blob file whose batch failed, or whose record
	// went and which is gone from disk.
	Drop(num uint32)
	// Install installs records a committed batch wrote.
	Install(rs ...catalog.BlobFile)
	// Retire unregisters a blob file the catalog no longer references and
	// has it removed once no view maps it.
	Retire(num uint32)
}
