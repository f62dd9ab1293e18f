package recovery

import (
	"strings"
	"testing"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store/internal/catalog"
)

// TestApplyRepoint loses the batch of a compaction that copied file 1's
// packets (and file 3's) into file 4 and removed file 1: the packets
// whose file is gone are repointed to their copies, found by their (stale)
// put records; the packet whose file is still on disk keeps its place.
func TestApplyRepoint(t *testing.T) {
	f := newFixture(t)
	f.create(1)
	a, b := f.put(1, 0, 1), f.put(1, 1, 2)
	f.create(3)
	c := f.put(3, 2, 3)
	f.catalogue(4, 3, []catalog.BlobFile{live(1, a, b), live(3, c)}, a, b, c)
	f.create(4)
	a4, c4, b4 := f.put(4, 0, 1), f.put(4, 2, 3), f.put(4, 1, 2)
	_ = f.files[1].Close()
	delete(f.files, 1)
	if err := f.fs.Remove(f.path(1)); err != nil {
		t.Fatal(err)
	}

	p := reconcile(t, f.store(false))
	want := Report{Scanned: 3, Repointed: 2, Stale: 1, NewFiles: 1}
	if r := p.Report; !reportEqual(r, want) {
		t.Errorf("report %+v, want %+v", r, want)
	}
	if err := p.Commit(); err != nil {
		t.Fatal(err)
	}
	for _, w := range []*format.PacketHeader{a4, b4, c} {
		if got := f.header(w); got == nil || got.BlobFile != w.BlobFile || got.ExtentOffset != w.ExtentOffset {
			t.Errorf("packet %s: catalogued %+v, want it at %06d:%d", w.ID.Short(), got, w.BlobFile, w.ExtentOffset)
		}
	}
	want4 := catalog.BlobFile{Num: 4, Size: f.ends[4], Extents: 2, LiveExtents: 2,
		LiveBytes: a4.ExtentLength + b4.ExtentLength, DeadBytes: c4.ExtentLength}
	if got, _ := f.blobFile(4); got != want4 {
		t.Errorf("file 4: %+v, want %+v (c's copy dead: c stays in file 3)", got, want4)
	}
	if got, _ := f.blobFile(1); got.LiveBytes != 0 || got.LiveExtents != 0 || got.DeadBytes != a.ExtentLength+b.ExtentLength || !got.Sealed {
		t.Errorf("file 1: %+v, want every extent dead and the file sealed", got)
	}
}

// TestApplyDuplicatesAndTombstones: a copy of a record (same sequence)
// is a duplicate, not a second insert; a tombstone for another model than
// the catalogued packet's is a problem and deletes nothing; a tombstone of
// a packet never catalogued is applied as a no-op. The file holding them
// is catalogued with all three dead; a file holding only a duplicate is
// not catalogued.
func TestApplyDuplicatesAndTombstones(t *testing.T) {
	f := newFixture(t)
	f.create(1)
	a := f.put(1, 0, 1)
	f.catalogue(2, 1, []catalog.BlobFile{live(1, a)}, a)
	c := f.put(1, 1, 2)
	f.create(2)
	start := f.ends[2]
	f.put(2, 1, 2) // compaction's copy of c's record
	f.tombstone(2, 2, a, format.Fingerprint{0x01})
	x := &format.PacketHeader{Namespace: "ns", ID: format.PacketID{0x77}, Model: a.Model}
	f.tombstone(2, 3, x, format.Fingerprint{})
	f.create(3)
	f.put(3, 1, 2) // another copy, alone in its file: nothing there applies

	p := reconcile(t, f.store(false))
	r := p.Report
	want := Report{Scanned: 5, Inserted: 1, NewFiles: 1, Problems: r.Problems}
	if !reportEqual(r, want) || len(r.Problems) != 1 || !strings.Contains(r.Problems[0], "for model") {
		t.Errorf("report %+v, want %+v with one problem: the tombstone for another model", r, want)
	}
	if p.NextSeq() != 4 {
		t.Errorf("next sequence %d, want 4", p.NextSeq())
	}
	if err := p.Commit(); err != nil {
		t.Fatal(err)
	}
	if f.header(a) == nil {
		t.Errorf("packet %s deleted by a tombstone for another model", a.ID.Short())
	}
	if got := f.header(c); got == nil || got.BlobFile != 1 {
		t.Errorf("packet %s: %+v, want it in file 1 (the first of two records of the same sequence)", c.ID.Short(), got)
	}
	if len(f.dropped) != 0 {
		t.Errorf("DropPacket called for %v, want none", f.dropped)
	}
	want2 := catalog.BlobFile{Num: 2, Size: f.ends[2], Extents: 3, DeadBytes: f.ends[2] - start}
	if got, _ := f.blobFile(2); got != want2 {
		t.Errorf("file 2: %+v, want %+v", got, want2)
	}
	if got, ok := f.blobFile(3); ok {
		t.Errorf("file 3 catalogued (%+v): it holds only a duplicate", got)
	}
}
