package maint

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store/internal/bloblog"
	"github.com/kvstore/kvstore/store/internal/catalog"
)

// noFiles is a registry with no blob file open.
type noFiles struct{}

func (noFiles) File(uint32) *bloblog.File { return nil }
func (noFiles) Retiring(uint32) bool      { return false }

// testStore opens a catalog on a MemFS with an empty blobs/ directory.
func testStore(t *testing.T) *Store {
	t.Helper()
	fs := vfs.NewMem()
	if err := fs.MkdirAll("blobs", 0o755); err != nil {
		t.Fatal(err)
	}
	cat, err := catalog.Open("catalog", &catalog.Options{FS: fs, CacheSize: 1 << 20, MemTableSize: 1 << 20,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cat.Close() })
	return &Store{Catalog: cat, FS: fs, Dir: "blobs", Files: noFiles{}}
}

// set commits key = value.
func set(t *testing.T, s *Store, kvs ...[]byte) {
	t.Helper()
	b := s.Catalog.DB.NewBatch()
	for i := 0; i < len(kvs); i += 2 {
		if err := b.Set(kvs[i], kvs[i+1], nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Catalog.Commit(b); err != nil {
		t.Fatal(err)
	}
}

// writeFile writes blob file num with bytes b.
func writeFile(t *testing.T, s *Store, num uint32, b []byte) {
	t.Helper()
	f, err := s.FS.Create(s.Path(num), vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func kinds(fs []Finding) []string {
	var out []string
	for _, f := range fs {
		out = append(out, string(f.Kind)+": "+f.Detail)
	}
	return out
}

func TestCheckFindingsAndGarbage(t *testing.T) {
	s := testStore(t)
	writeFile(t, s, 1, format.EncodeBlobHeader(1))                                // no record: garbage
	writeFile(t, s, 3, append(format.EncodeBlobHeader(4), make([]byte, 4096)...)) // header names file 4, tail past the record
	set(t, s,
		catalog.BlobFileKey(2), catalog.EncodeBlobFile(&catalog.BlobFile{Num: 2, Size: format.BlobHeaderSize}), // gone, no live extent
		catalog.BlobFileKey(3), catalog.EncodeBlobFile(&catalog.BlobFile{Num: 3, Size: format.BlobHeaderSize}),
		catalog.KeyNextBlob, catalog.EncodeSequence(3), // not past file 3
		catalog.SpanMetaKey("ns", "ctx"), []byte("not a record"),
	)
	s.Active, s.HasActive = 3, true
	var calls int
	rep, err := Check(context.Background(), s, func(done, total int64) { calls++ })
	if err != nil {
		t.Fatal(err)
	}
	if rep.Files != 2 || rep.Packets != 0 || rep.SpanMemories != 0 || calls != 0 {
		t.Fatalf("report %+v, progress calls %d", rep, calls)
	}
	want := map[FindingKind]string{
		FindingBlobHeader: "header names file 000004",
		FindingAccounting: "next-blob sequence 3 is not past blob file 000003",
		FindingRecord:     "key 63",
	}
	if len(rep.Findings) != len(want) {
		t.Fatalf("findings %q, want one of each of %v", kinds(rep.Findings), want)
	}
	for _, f := range rep.Findings {
		if !strings.Contains(f.Detail, want[f.Kind]) {
			t.Errorf("finding %v, want its detail to hold %q", f, want[f.Kind])
		}
	}
	wantG := []Garbage{
		{Kind: GarbageRecord, Num: 2, File: s.Path(2)},
		{Kind: GarbageTail, Num: 3, File: s.Path(3), Offset: format.BlobHeaderSize, Length: 4096, Reused: true},
		{Kind: GarbageFile, Num: 1, File: s.Path(1), Length: format.BlobHeaderSize},
	}
	if len(rep.Garbage) != len(wantG) {
		t.Fatalf("garbage %+v, want %+v", rep.Garbage, wantG)
	}
	for i := range wantG {
		if rep.Garbage[i] != wantG[i] {
			t.Errorf("garbage %d: %+v, want %+v", i, rep.Garbage[i], wantG[i])
		}
	}
	if rep.GarbageBytes != 4096+format.BlobHeaderSize || rep.OK() {
		t.Fatalf("garbage bytes %d, OK %v", rep.GarbageBytes, rep.OK())
	}
}

func TestCheckHealthyEmpty(t *testing.T) {
	s := testStore(t)
	rep, err := Check(context.Background(), s, nil)
	if err != nil || !rep.OK() || len(rep.Garbage) != 0 {
		t.Fatalf("empty store: %+v, %v", rep, err)
	}
}

func TestDiskFiles(t *testing.T) {
	s := testStore(t)
	writeFile(t, s, 5, make([]byte, 100))
	writeFile(t, s, 7, nil)
	f, _ := s.FS.Create("blobs/notes.txt", vfs.WriteCategoryUnspecified)
	_ = f.Close()
	disk, err := DiskFiles(s.FS, s.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(disk) != 2 || disk[5] != 100 || disk[7] != 0 {
		t.Fatalf("disk files %v, want 5:100 7:0", disk)
	}
	if _, err := DiskFiles(s.FS, "missing"); err == nil {
		t.Fatal("listing a missing directory did not fail")
	}
}

func TestVerifyRecordsAndLimit(t *testing.T) {
	s := testStore(t)
	set(t, s,
		catalog.SpanMetaKey("ns", "a"), []byte("bad"),
		catalog.SpanMetaKey("ns", "b"), []byte("bad"),
		catalog.HeaderKey("ns", format.PacketID{1}), []byte("bad"),
	)
	snap := s.Catalog.DB.NewSnapshot()
	defer snap.Close()
	rep, err := Verify(context.Background(), s, snap, nil, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Findings) != 3 || rep.Truncated || rep.OK() || rep.Extents != 0 {
		t.Fatalf("report %+v, want 3 record findings", rep)
	}
	for _, f := range rep.Findings {
		if f.Kind != FindingRecord || f.Layer != -1 {
			t.Errorf("finding %v, want a record finding", f)
		}
	}
}

func TestLoadRecords(t *testing.T) {
	s := testStore(t)
	set(t, s,
		catalog.BlobFileKey(1), catalog.EncodeBlobFile(&catalog.BlobFile{Num: 1, Size: 8192, LiveBytes: 4096, Extents: 1, LiveExtents: 1}),
		catalog.BlobFileKey(2), []byte("bad"),
	)
	var bad []BadRecord
	recs, err := LoadRecords(s.Catalog.DB, func(b BadRecord) { bad = append(bad, b) })
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 || recs[1].Size != 8192 || recs[1].LiveExtents != 1 {
		t.Fatalf("records %+v, bad %v", recs, bad)
	}
	if len(bad) != 1 || string(bad[0].Key) != string(catalog.BlobFileKey(2)) || !errors.Is(bad[0].Err, format.ErrCorruption) {
		t.Fatalf("bad records %+v", bad)
	}
}
