package maint

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store/internal/bloblog"
	"github.com/kvstore/kvstore/store/internal/catalog"
)

// openFiles is a registry that opens every blob file asked for.
type openFiles struct{ s *Store }

func (o openFiles) File(num uint32) *bloblog.File {
	return bloblog.NewFile(o.s.FS, o.s.Dir, num, false, 0, slog.New(slog.DiscardHandler))
}
func (openFiles) Retiring(uint32) bool { return false }

func TestCompactionPicksAndRetiresDeadFiles(t *testing.T) {
	s := testStore(t)
	s.Files = openFiles{s}
	hdr := uint64(format.BlobHeaderSize)
	recs := []catalog.BlobFile{
		{Num: 1, Size: hdr + 4096, DeadBytes: 4096, Extents: 1, Sealed: true},                                  // dead: chosen, nothing to copy
		{Num: 2, Size: hdr + 8192, DeadBytes: 8192, Extents: 2},                                                // active: never chosen
		{Num: 3, Size: hdr + 4096, LiveBytes: 4096, Extents: 1, LiveExtents: 1, Sealed: true},                  // all live: not chosen
		{Num: 4, Size: hdr + 8192, LiveBytes: 4096, DeadBytes: 4096, Extents: 2, LiveExtents: 1, Sealed: true}, // chosen, but no extent references it
	}
	var kvs [][]byte
	for _, r := range recs {
		writeFile(t, s, r.Num, append(format.EncodeBlobHeader(r.Num), make([]byte, r.Size-hdr)...))
		kvs = append(kvs, catalog.BlobFileKey(r.Num), catalog.EncodeBlobFile(&r))
	}
	set(t, s, kvs...)
	s.Active, s.HasActive = 2, true
	c := NewCompaction(s, &CompactOptions{LiveRatio: 0.6}, recs, 5, 1<<20)
	if c.Empty() {
		t.Fatal("nothing chosen")
	}
	if err := c.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	rep := c.Report()
	if len(rep.Skipped) != 2 || rep.Skipped[0].Num != 2 || !strings.Contains(rep.Skipped[0].Reason, "active file") ||
		rep.Skipped[1].Num != 4 || !strings.Contains(rep.Skipped[1].Reason, "run check") {
		t.Fatalf("skipped %+v, want file 2 (the active one) and 4 (its record does not match the catalog)", rep.Skipped)
	}
	b := s.Catalog.DB.NewBatch()
	if err := c.Batch(b); err != nil {
		t.Fatal(err)
	}
	if err := s.Catalog.Commit(b); err != nil {
		t.Fatal(err)
	}
	if len(c.Outputs()) != 0 || len(c.Moved()) != 0 {
		t.Fatalf("outputs %v, moved %v: nothing was live", c.Outputs(), c.Moved())
	}
	if got := c.Finish(); !slices.Equal(got, []uint32{1}) {
		t.Fatalf("retire %v, want [1]", got)
	}
	if !slices.Equal(rep.Rewritten, []uint32{1}) || rep.BytesReclaimed != hdr+4096 || rep.BytesCopied != 0 {
		t.Fatalf("report %+v", rep)
	}
	for _, r := range recs {
		found, err := s.Catalog.Has(catalog.BlobFileKey(r.Num))
		if err != nil {
			t.Fatal(err)
		}
		if found != (r.Num != 1) {
			t.Errorf("blob file %d record present %v after the batch", r.Num, found)
		}
	}
}

func TestCompactionFilesOption(t *testing.T) {
	s := testStore(t)
	recs := []catalog.BlobFile{{Num: 1, Size: format.BlobHeaderSize + 4096, LiveBytes: 4096, Extents: 1, LiveExtents: 1}, {Num: 2}}
	s.Active, s.HasActive = 2, true
	if c := NewCompaction(s, &CompactOptions{LiveRatio: 1}, recs, 3, 1<<20); !c.Empty() {
		t.Fatal("a wholly live file was chosen by ratio")
	}
	if c := NewCompaction(s, &CompactOptions{Files: []uint32{2}}, recs, 3, 1<<20); !c.Empty() {
		t.Fatal("the active file was chosen")
	}
	if c := NewCompaction(s, &CompactOptions{Files: []uint32{1}}, recs, 3, 1<<20); c.Empty() {
		t.Fatal("a file named in Files was not chosen")
	}
}

// Debt counts the dead bytes of files below the ratio, the highest
// numbered unsealed file (the active one) excepted.
func TestDebt(t *testing.T) {
	recs := []catalog.BlobFile{
		{Num: 1, LiveBytes: 100, DeadBytes: 300, Sealed: true}, // 25% live: counted
		{Num: 2, LiveBytes: 300, DeadBytes: 100, Sealed: true}, // 75% live: not
		{Num: 3, LiveBytes: 0, DeadBytes: 50},                  // unsealed, but not the last: counted
		{Num: 4, LiveBytes: 0, DeadBytes: 70},                  // the active file: not
	}
	if got := Debt(recs, 0.5); got != 350 {
		t.Fatalf("debt %d, want 350", got)
	}
	if got := Debt(recs, 1); got != 450 {
		t.Fatalf("debt at ratio 1: %d, want 450", got)
	}
}
