package maint

import (
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/kvstore/kvstore/store/internal/bloblog"
	"github.com/kvstore/kvstore/store/internal/catalog"
)

// Store is what maintenance reads of the store, given explicitly: the
// catalog, where the blob files are, and the registry of open blob files.
// The store builds one per call; maintenance never sees the DB.
type Store struct {
	Catalog *catalog.Catalog
	FS      vfs.FS
	Dir     string // the blobs/ directory
	Files   Files
	// Active is the number of the blob file writes append to, if any.
	Active    uint32
	HasActive bool
	// SyncData fdatasyncs a blob file maintenance wrote (nil: f.SyncData);
	// the store counts and times it.
	SyncData func(f vfs.File) error
	// Wrote counts bytes maintenance wrote to blob files (nil: not counted).
	Wrote func(n uint64)
}

// Files is the store's registry of catalogued blob files.
type Files interface {
	// File takes a reference on blob file num for a reader; nil if the
	// file is not catalogued (or is being retired).
	File(num uint32) *bloblog.File
	// Retiring reports whether blob file num left the catalog but is
	// still mapped by a view (so it is not an orphan).
	Retiring(num uint32) bool
}

// Path is blob file num's path.
func (s *Store) Path(num uint32) string { return s.FS.PathJoin(s.Dir, bloblog.FileName(num)) }

// syncData fdatasyncs f through s.SyncData when set.
func (s *Store) syncData(f vfs.File) error {
	if s.SyncData != nil {
		return s.SyncData(f)
	}
	return f.SyncData()
}

// wrote counts n bytes written to blob files through s.Wrote when set.
func (s *Store) wrote(n uint64) {
	if s.Wrote != nil {
		s.Wrote(n)
	}
}
