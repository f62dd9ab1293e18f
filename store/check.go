package store

import (
	"context"

	"github.com/kvstore/kvstore/store/internal/maint"
)

// GarbageKind classifies what a crash or an interrupted operation may
// legitimately leave behind: bytes nothing references, which GC reclaims.
// Garbage is never an inconsistency: a store with garbage and no findings
// is healthy.
type GarbageKind string

// Garbage kinds (store/internal/maint finds them; reports print their names).
const (
	// GarbageTail: bytes past a blob file's catalogued size, left by an append
	// whose catalog batch never committed. In the active file (Reused) the next
	// extent overwrites them; elsewhere GC rewrites the file's live extents and
	// removes it.
	GarbageTail GarbageKind = "tail"
	// GarbageFile: a blob file with no catalog record: created by a write or a
	// compaction that never committed, or retired by one that committed but had
	// not yet removed it. GC removes it.
	GarbageFile GarbageKind = "unreferenced-file"
	// GarbageRecord: the record of a blob file that is gone and held no live
	// extent. GC deletes it.
	GarbageRecord GarbageKind = "record-without-file"
)

// String is the kind's name, as reports print it.
func (k GarbageKind) String() string { return string(k) }

// Garbage is one piece of reclaimable space.
type Garbage struct {
	// Kind says what left it and how GC reclaims it.
	Kind GarbageKind
	// Num is the blob file's number, File its path.
	Num  uint32
	File string
	// Offset and Length are the unreferenced bytes' place in the file.
	Offset uint64
	Length uint64
	// Extents is how many whole extents (trailers) the bytes hold.
	Extents int
	// Reused: the active file's tail, which the next write overwrites
	// (blob files cannot be truncated through vfs.FS).
	Reused bool
}

// fromGarbage is maint's garbage as the store's.
func fromGarbage(g maint.Garbage) Garbage {
	return Garbage{Kind: GarbageKind(g.Kind), Num: g.Num, File: g.File, Offset: g.Offset, Length: g.Length,
		Extents: g.Extents, Reused: g.Reused}
}

// CheckReport is what Check found.
type CheckReport struct {
	// Files, Packets and SpanMemories are what the catalog holds: blob
	// files, packets and span memories.
	Files        int
	Packets      int
	SpanMemories int
	// Findings are inconsistencies: a healthy store has none.
	Findings []Finding
	// Garbage is reclaimable space (GC); it is not an inconsistency.
	Garbage []Garbage
	// GarbageBytes is the bytes Garbage lists.
	GarbageBytes uint64
}

// OK reports whether Check found no inconsistency (garbage is fine).
func (r *CheckReport) OK() bool { return len(r.Findings) == 0 }

// fromCheckReport is maint's report as the store's; nil stays nil.
func fromCheckReport(r *maint.CheckReport) *CheckReport {
	if r == nil {
		return nil
	}
	return &CheckReport{Files: r.Files, Packets: r.Packets, SpanMemories: r.SpanMemories,
		Findings: mapSlice(r.Findings, fromFinding), Garbage: mapSlice(r.Garbage, fromGarbage), GarbageBytes: r.GarbageBytes}
}

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
	var rep *maint.CheckReport
	err := db.exclusive(func() error {
		var err error
		rep, err = maint.Check(ctx, db.maintStore(true), o.Progress)
		return err
	})
	return fromCheckReport(rep), err
}

// CheckOptions tune Check. The zero value means the defaults.
type CheckOptions struct {
	// Progress, if not nil, is called with the extents checked and the
	// catalogued live extents.
	Progress func(done, total int64)
}
