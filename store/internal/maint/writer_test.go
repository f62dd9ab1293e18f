package maint

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/cockroachdb/pebble/v2"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store/internal/catalog"
)

// fakeRegistry is a registry of records that logs what was done to it.
type fakeRegistry struct {
	recs  map[uint32]catalog.BlobFile
	calls []string
}

func (f *fakeRegistry) Records() []catalog.BlobFile {
	var rs []catalog.BlobFile
	for _, n := range SortedKeys(f.recs) {
		rs = append(rs, f.recs[n])
	}
	return rs
}
func (f *fakeRegistry) Add(r catalog.BlobFile) { f.recs[r.Num] = r; f.log("add", r.Num) }
func (f *fakeRegistry) Drop(num uint32)        { delete(f.recs, num); f.log("drop", num) }
func (f *fakeRegistry) Retire(num uint32)      { delete(f.recs, num); f.log("retire", num) }
func (f *fakeRegistry) Install(rs ...catalog.BlobFile) {
	for _, r := range rs {
		f.recs[r.Num] = r
		f.log("install", r.Num)
	}
}
func (f *fakeRegistry) log(what string, num uint32) {
	f.calls = append(f.calls, fmt.Sprintf("%s %d", what, num))
}

// testWriter is a Writer over testStore with recs catalogued, in the
// registry and on disk with disk[num] bytes (those not in disk are gone).
func testWriter(t *testing.T, recs []catalog.BlobFile, disk map[uint32]uint64) (*Writer, *fakeRegistry) {
	t.Helper()
	s := testStore(t)
	s.Files = openFiles{s}
	reg := &fakeRegistry{recs: map[uint32]catalog.BlobFile{}}
	var kvs [][]byte
	for _, r := range recs {
		reg.recs[r.Num] = r
		kvs = append(kvs, catalog.BlobFileKey(r.Num), catalog.EncodeBlobFile(&r))
	}
	if len(kvs) > 0 {
		set(t, s, kvs...)
	}
	for num, size := range disk {
		writeFile(t, s, num, append(format.EncodeBlobHeader(num), make([]byte, size-format.BlobHeaderSize)...))
	}
	return &Writer{Store: s, Registry: reg, Commit: s.Catalog.Commit, Next: 10, FileSize: 1 << 20}, reg
}

func catalogued(t *testing.T, s *Store, num uint32) bool {
	t.Helper()
	ok, err := s.Catalog.Has(catalog.BlobFileKey(num))
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

func TestGroups(t *testing.T) {
	srcs := []catalog.BlobFile{{Num: 1, LiveBytes: 10}, {Num: 2, LiveBytes: 20}, {Num: 3, LiveBytes: 50}, {Num: 4, LiveBytes: 200}, {Num: 5, LiveBytes: 5}}
	got := groups(srcs, 60)
	want := [][]uint32{{1, 2}, {3}, {4}, {5}}
	if !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("groups %v, want %v (at most 60 live bytes each, a bigger file alone)", got, want)
	}
	if g := groups(nil, 60); len(g) != 0 {
		t.Fatalf("groups of nothing: %v", g)
	}
}

func TestMerge(t *testing.T) {
	rep := &CompactReport{Rewritten: []uint32{1}, Created: []uint32{9}, Extents: 2, BytesCopied: 10, BytesReclaimed: 5,
		Skipped: []SkippedFile{{Num: 3, Reason: "a"}}}
	merge(rep, &CompactReport{Rewritten: []uint32{2}, Created: []uint32{10}, Extents: 1, BytesCopied: 7, BytesReclaimed: 1,
		Skipped: []SkippedFile{{Num: 4, Reason: "b"}}})
	if !slices.Equal(rep.Rewritten, []uint32{1, 2}) || !slices.Equal(rep.Created, []uint32{9, 10}) || rep.Extents != 3 ||
		rep.BytesCopied != 17 || rep.BytesReclaimed != 6 || len(rep.Skipped) != 2 || rep.Skipped[1].Num != 4 {
		t.Fatalf("merged %+v", rep)
	}
}

// Compact commits a group, installs it, retires its sources and reports
// it through Compacted; a dry run only reports; a failed commit is the
// error and retires nothing.
func TestWriterCompact(t *testing.T) {
	hdr := uint64(format.BlobHeaderSize)
	recs := []catalog.BlobFile{
		{Num: 1, Size: hdr + 4096, DeadBytes: 4096, Extents: 1, Sealed: true},
		{Num: 2, Size: hdr + 4096, DeadBytes: 4096, Extents: 1, Sealed: true},
		{Num: 3, Size: hdr + 4096, LiveBytes: 4096, Extents: 1, LiveExtents: 1, Sealed: true}, // all live: not chosen
	}
	disk := map[uint32]uint64{1: hdr + 4096, 2: hdr + 4096, 3: hdr + 4096}

	w, reg := testWriter(t, recs, disk)
	dry, err := w.Compact(context.Background(), &CompactOptions{LiveRatio: 0.6, DryRun: true})
	if err != nil || !slices.Equal(dry.Rewritten, []uint32{1, 2}) || dry.BytesReclaimed != 2*(hdr+4096) || len(reg.calls) != 0 {
		t.Fatalf("dry run: %+v, %v, registry calls %v", dry, err, reg.calls)
	}

	w.Commit = func(*pebble.Batch) error { return errors.New("commit failed") }
	if _, err := w.Compact(context.Background(), &CompactOptions{LiveRatio: 0.6}); err == nil || len(reg.calls) != 0 || !catalogued(t, w.Store, 1) {
		t.Fatalf("failed commit: %v, registry calls %v", err, reg.calls)
	}

	w.Commit = w.Catalog.Commit
	var steps int
	w.Compacted = func(rep *CompactReport, moved []*format.PacketHeader) {
		steps++
		if !slices.Equal(rep.Rewritten, []uint32{1, 2}) || len(moved) != 0 {
			t.Errorf("group %+v, moved %v", rep, moved)
		}
	}
	rep, err := w.Compact(context.Background(), &CompactOptions{LiveRatio: 0.6})
	if err != nil {
		t.Fatal(err)
	}
	if steps != 1 || !slices.Equal(rep.Rewritten, []uint32{1, 2}) || rep.BytesReclaimed != 2*(hdr+4096) || w.Next != 10 {
		t.Fatalf("report %+v after %d groups, next %d", rep, steps, w.Next)
	}
	if !slices.Equal(reg.calls, []string{"retire 1", "retire 2"}) {
		t.Fatalf("registry calls %v, want the two sources retired", reg.calls)
	}
	if catalogued(t, w.Store, 1) || catalogued(t, w.Store, 2) || !catalogued(t, w.Store, 3) {
		t.Fatal("the sources' records are not the ones deleted")
	}
}

// GC removes orphans, drops dead records (retiring files on disk, dropping
// gone ones, the active one included) and reports the bytes; a dry run
// reports the same and changes nothing.
func TestWriterGC(t *testing.T) {
	hdr := uint64(format.BlobHeaderSize)
	recs := []catalog.BlobFile{
		{Num: 1, Size: hdr + 4096, DeadBytes: 4096, Extents: 1, Sealed: true}, // dead, on disk
		{Num: 2, Size: hdr + 4096, DeadBytes: 4096, Extents: 1, Sealed: true}, // dead, gone
		{Num: 3, Size: hdr + 4096, LiveBytes: 4096, Extents: 1, LiveExtents: 1, Sealed: true},
		{Num: 4, Size: hdr},
	}
	disk := map[uint32]uint64{1: hdr + 4096, 3: hdr + 4096, 7: hdr + 8192} // 7: an orphan; 4, the active file, is gone
	w, reg := testWriter(t, recs, disk)
	w.Active, w.HasActive = 4, true
	dropped := 0
	w.DropActive = func() { dropped++ }
	check := func(what string, rep *GCReport) {
		t.Helper()
		if !slices.Equal(rep.FilesRemoved, []uint32{7, 1}) || !slices.Equal(rep.RecordsRemoved, []uint32{1, 2, 4}) ||
			rep.BytesReclaimed != 2*hdr+8192+4096 || rep.Compaction != nil {
			t.Fatalf("%s: %+v", what, rep)
		}
	}

	rep, err := w.GC(context.Background(), &GCOptions{DryRun: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	check("dry run", rep)
	if len(reg.calls) != 0 || dropped != 0 || !catalogued(t, w.Store, 1) {
		t.Fatalf("dry run changed things: registry %v, active dropped %d", reg.calls, dropped)
	}
	if _, err := w.FS.Stat(w.Path(7)); err != nil {
		t.Fatalf("dry run removed the orphan: %v", err)
	}

	rep, err = w.GC(context.Background(), &GCOptions{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	check("GC", rep)
	if !slices.Equal(reg.calls, []string{"retire 1", "drop 2", "drop 4"}) || dropped != 1 || w.HasActive {
		t.Fatalf("registry calls %v, active dropped %d (has active %v)", reg.calls, dropped, w.HasActive)
	}
	if _, err := w.FS.Stat(w.Path(7)); err == nil {
		t.Fatal("the orphan is still on disk")
	}
	for _, num := range []uint32{1, 2, 4} {
		if catalogued(t, w.Store, num) {
			t.Errorf("record of dead file %d kept", num)
		}
	}
	if !catalogued(t, w.Store, 3) {
		t.Error("record of the live file 3 dropped")
	}
}
