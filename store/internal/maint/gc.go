package maint

import "github.com/kvstore/kvstore/store/internal/catalog"

// GCReport says what GC reclaimed.
type GCReport struct {
	// FilesRemoved are blob files removed: unreferenced ones, and fully
	// dead ones whose records went (those are removed once no view maps
	// them).
	FilesRemoved []uint32
	// RecordsRemoved are blob file records deleted from the catalog.
	RecordsRemoved []uint32
	BytesReclaimed uint64
	// Compaction is the rewrite of files with garbage tails (nil if none).
	Compaction *CompactReport
}

// GCPlan is what GC reclaims, decided from the catalogued blob files and
// the files on disk (DiskFiles).
type GCPlan struct {
	// Orphans are files on disk with no record that no view maps: removed.
	Orphans []uint32
	// Dead are the records of files with no live extent that are gone from
	// disk or are not the active file: deleted in one synced batch, then
	// their files retired.
	Dead []catalog.BlobFile
	// Tails are files other than the active one with bytes past their
	// catalogued size (a crashed append): compacted.
	Tails []uint32
}

// PlanGC plans a GC of the blob files recs (every catalogued one, in
// number order) against disk; active is the file writes append to (0:
// none), whose tail the next write overwrites; retiring reports files that
// left the catalog but are still mapped.
func PlanGC(recs []catalog.BlobFile, disk map[uint32]uint64, active uint32, retiring func(uint32) bool) *GCPlan {
	p := &GCPlan{}
	known := make(map[uint32]bool, len(recs))
	for _, r := range recs {
		known[r.Num] = true
	}
	for _, num := range SortedKeys(disk) {
		if !known[num] && !retiring(num) {
			p.Orphans = append(p.Orphans, num)
		}
	}
	for _, r := range recs {
		size, onDisk := disk[r.Num]
		switch {
		case r.Num == active && onDisk:
		case r.LiveExtents == 0 && (!onDisk || r.Num != active):
			p.Dead = append(p.Dead, r)
		case onDisk && size > r.Size:
			p.Tails = append(p.Tails, r.Num)
		}
	}
	return p
}
