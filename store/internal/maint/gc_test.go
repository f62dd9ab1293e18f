package maint

import (
	"slices"
	"testing"

	"github.com/kvstore/kvstore/store/internal/catalog"
)

func TestPlanGC(t *testing.T) {
	recs := []catalog.BlobFile{
		{Num: 1, Size: 8192, LiveExtents: 0},  // dead, on disk, not active
		{Num: 2, Size: 8192, LiveExtents: 0},  // dead, gone from disk
		{Num: 3, Size: 8192, LiveExtents: 1},  // live with a tail
		{Num: 4, Size: 8192, LiveExtents: 1},  // live, no tail
		{Num: 5, Size: 8192, LiveExtents: 0},  // active, empty: kept
		{Num: 6, Size: 16384, LiveExtents: 2}, // live, shorter on disk than its record (Check's finding, not GC's)
	}
	disk := map[uint32]uint64{1: 8192, 3: 12288, 4: 8192, 5: 12288, 6: 8192, 7: 4096, 8: 4096}
	retiring := func(num uint32) bool { return num == 8 }
	p := PlanGC(recs, disk, 5, retiring)
	if !slices.Equal(p.Orphans, []uint32{7}) {
		t.Errorf("orphans %v, want [7] (8 is still mapped)", p.Orphans)
	}
	var dead []uint32
	for _, r := range p.Dead {
		dead = append(dead, r.Num)
	}
	if !slices.Equal(dead, []uint32{1, 2}) {
		t.Errorf("dead %v, want [1 2]", dead)
	}
	if !slices.Equal(p.Tails, []uint32{3}) {
		t.Errorf("tails %v, want [3] (the active file's tail is reused)", p.Tails)
	}
	// An active file gone from disk with no live extent loses its record.
	delete(disk, 5)
	p = PlanGC(recs, disk, 5, retiring)
	if len(p.Dead) != 3 || p.Dead[2].Num != 5 {
		t.Errorf("dead %+v, want 1, 2 and the vanished active file 5", p.Dead)
	}
}
