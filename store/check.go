package store

import (
	"context"

	"github.com/kvstore/kvstore/store/internal/maint"
)

// GarbageKind classifies what a crash or an interrupted operation may
// legitimately leave behind: bytes nothing references, which GC reclaims.
// Garbage is never an inconsistency: a store with garbage and no findings
// is healthy.
type GarbageKind = maint.GarbageKind

// Garbage kinds (store/internal/maint says what each is and how GC
// reclaims it).
const (
	GarbageTail   = maint.GarbageTail   // bytes past a blob file's catalogued size
	GarbageFile   = maint.GarbageFile   // a blob file with no catalog record
	GarbageRecord = maint.GarbageRecord // the record of a gone blob file with no live extent
)

// Garbage is one piece of reclaimable space.
type Garbage = maint.Garbage

// CheckReport is what Check found.
type CheckReport = maint.CheckReport

// Check checks the catalog against the blob files without reading
// payloads (Verify does that): every header and span memory points into a
// catalogued blob file that exists, inside its catalogued size and its end,
// at an extent whose trailer names it; no two extents overlap; each blob
// file record's live bytes and extents equal what references it and its
// live plus dead bytes fill it; every blob file's header is good; index
// entries and headers match one for one; every model spec referenced is
// catalogued; the next-blob sequence is past every file. Space nothing
// references (Garbage) is listed apart from findings.
//
// Check holds the writer lock while it runs, so writers (Put, Delete,
// Compact, GC) wait; readers do not. o.Progress, if not nil, is called
// with the extents checked and the catalogued live extents. The error is
// only for I/O failures, ErrClosed and ctx's error.
func (db *DB) Check(ctx context.Context, o CheckOptions) (*CheckReport, error) {
	var rep *CheckReport
	err := db.exclusive(func() error {
		var err error
		rep, err = maint.Check(ctx, db.maintStore(true), o.Progress)
		return err
	})
	return rep, err
}

// CheckOptions tune Check. The zero value means the defaults.
type CheckOptions struct {
	// Progress, if not nil, is called with the extents checked and the
	// catalogued live extents.
	Progress func(done, total int64)
}
