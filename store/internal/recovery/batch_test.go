package recovery

import (
	"testing"

	"github.com/kvstore/kvstore/format"
)

// TestCommitRebuildWritesSequences: a rebuild commits even when it found
// nothing to insert, so that the new catalog holds both sequences (next
// blob past every file on disk, next record past every record seen); a
// Store without DropPacket applies a tombstone all the same.
func TestCommitRebuildWritesSequences(t *testing.T) {
	f := newFixture(t)
	f.create(1)
	a := f.put(1, 6, 1)
	f.tombstone(1, 7, a, format.Fingerprint{})
	f.create(2)
	s := f.store(true)
	s.DropPacket = nil
	p := reconcile(t, s)
	if r := p.Report; r.Inserted != 1 || r.Deleted != 1 || len(r.Problems) != 0 {
		t.Errorf("report %+v, want one insert and its delete", r)
	}
	if err := p.Commit(); err != nil {
		t.Fatal(err)
	}
	if f.header(a) != nil {
		t.Errorf("deleted packet %s catalogued", a.ID.Short())
	}
	if next, seq := f.sequences(); next != 3 || seq != 8 {
		t.Errorf("catalog sequences: next blob %d, next record %d; want 3 and 8", next, seq)
	}
}
