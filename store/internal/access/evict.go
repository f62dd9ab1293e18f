package access

import (
	"cmp"
	"slices"
)

// Victim is an eviction candidate.
type Victim struct {
	Key  Key
	Size uint64
	Last int64
	Uses uint64
}

// Candidates lists the unpinned packets of a loaded table in eviction
// order: least recently used first, or with lfu least frequently used
// first (ties: least recently used); ties after that by packet id.
func (t *Table) Candidates(lfu bool) []Victim {
	var vs []Victim
	t.Each(func(k Key, e *Entry) {
		if e.Size > 0 && !e.Pinned {
			vs = append(vs, Victim{k, e.Size, e.Last.Load(), e.Uses.Load()})
		}
	})
	slices.SortFunc(vs, func(a, b Victim) int {
		if lfu && a.Uses != b.Uses {
			return cmp.Compare(a.Uses, b.Uses)
		}
		if a.Last != b.Last {
			return cmp.Compare(uint64(a.Last), uint64(b.Last))
		}
		return slices.Compare(a.Key.ID[:], b.Key.ID[:])
	})
	return vs
}

// Plan returns how many of vs (in order) must go so that need more bytes
// fit under limit with live bytes stored, and the bytes they free; ok is
// false when even all of them would not make room.
func Plan(vs []Victim, live, need, limit uint64) (n int, freed uint64, ok bool) {
	for ; n < len(vs) && live-freed+need > limit; n++ {
		freed += vs[n].Size
	}
	return n, freed, live-freed+need <= limit
}
