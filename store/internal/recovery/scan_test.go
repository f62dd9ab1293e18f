package recovery

import (
	"strings"
	"testing"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store/internal/catalog"
)

// TestScanProblems: records that do not describe their extents, a damaged
// put record and a new file whose header names another file are each left
// out and named in Problems; a new file shorter than its header (created,
// never written to) and an uncatalogued file below the catalog's next
// blob number (an orphan GC removes) are not scanned at all. Nothing
// changes.
func TestScanProblems(t *testing.T) {
	f := newFixture(t)
	f.create(1)
	a := f.put(1, 0, 1)
	f.catalogue(3, 1, []catalog.BlobFile{live(1, a)}, a)
	other := format.PacketID{0xab}
	f.putAs(1, 1, other, 2) // trailer names another packet
	tomb, err := format.EncodeTombstone(&format.Tombstone{Seq: 2, Namespace: "ns", ID: a.ID, Model: a.Model})
	if err != nil {
		t.Fatal(err)
	}
	f.record(1, tomb, other) // so does this tombstone's
	rec, err := format.EncodePutRecord(3, a, f.spec)
	if err != nil {
		t.Fatal(err)
	}
	rec[len(rec)-1] ^= 0xff // a body byte: the frame's CRC fails
	f.record(1, rec, a.ID)

	f.create(2) // uncatalogued, below next blob 3
	f.put(2, 4, 3)
	f.createWith(3, format.EncodeBlobHeader(7))
	f.put(3, 5, 4)
	f.createWith(4, []byte("short"))

	p := reconcile(t, f.store(false))
	r := p.Report
	if r.Changed() || r.Scanned != 3 || r.NoRecord != 0 || r.Stale != 0 {
		t.Errorf("report %+v, want 3 extents scanned and nothing changed", r)
	}
	wants := []string{"does not describe its extent", "tombstone", "put record", "header"}
	if len(r.Problems) != len(wants) {
		t.Fatalf("problems %q, want %d", r.Problems, len(wants))
	}
	for i, w := range wants {
		if !strings.Contains(r.Problems[i], w) {
			t.Errorf("problem %d: %q, want it to say %q", i, r.Problems[i], w)
		}
	}
	if p.NextSeq() != 1 || p.NextBlob() != 3 {
		t.Errorf("next sequence %d, next blob %d; want the catalog's 1 and 3", p.NextSeq(), p.NextBlob())
	}
}

// TestScanStale: records older than the catalog's sequence are copies of
// what it already applied: counted as Stale and never replayed, so a
// tombstone older than the catalog does not delete a packet it holds.
func TestScanStale(t *testing.T) {
	f := newFixture(t)
	f.create(1)
	a, b := f.put(1, 0, 1), f.put(1, 1, 2)
	f.catalogue(2, 5, []catalog.BlobFile{live(1, a, b)}, a, b)
	f.tombstone(1, 3, a, format.Fingerprint{})
	f.put(1, 4, 2) // an older copy of b's record
	p := reconcile(t, f.store(false))
	if r := p.Report; r.Changed() || r.Stale != 2 || r.Scanned != 2 || len(r.Problems) != 0 {
		t.Errorf("report %+v, want 2 stale records and nothing changed", r)
	}
	if p.NextSeq() != 5 {
		t.Errorf("next sequence %d, want the catalog's 5", p.NextSeq())
	}
}
