package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/kvstore/kvstore/format"
)

// snapshotCatalog copies dir's catalog directory (store closed) to a
// temporary place and returns a function that puts it back, losing every
// catalog batch committed since: what a damaged WAL does.
func snapshotCatalog(t *testing.T, dir string) (restore func()) {
	t.Helper()
	saved := filepath.Join(t.TempDir(), "catalog")
	copyStore(t, filepath.Join(dir, catalogDirName), saved)
	return func() {
		cat := filepath.Join(dir, catalogDirName)
		if err := os.RemoveAll(cat); err != nil {
			t.Fatal(err)
		}
		copyStore(t, saved, cat)
	}
}

func openDisk(t *testing.T, dir string, o *Options) *DB {
	t.Helper()
	db, err := Open(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	return db
}

// wantPackets checks that each of kept reads back exactly and each of gone
// is ErrNotFound, and that Check is clean.
func wantPackets(t *testing.T, db *DB, spec *format.ModelSpec, kept map[format.PacketID]*Packet, gone []format.PacketID) {
	t.Helper()
	for id, p := range kept {
		if res := readPacket(db, spec, id, p); res != "exact" {
			t.Errorf("packet %s: %s", id.Short(), res)
		}
	}
	for _, id := range gone {
		if _, err := db.Get(context.Background(), "ns", spec.Fingerprint(), id); !errors.Is(err, ErrNotFound) {
			t.Errorf("deleted packet %s: Get: %v, want ErrNotFound", id.Short(), err)
		}
	}
	rep, err := db.Check(context.Background(), CheckOptions{})
	if err != nil || !rep.OK() {
		t.Errorf("Check: %v %+v", err, rep)
	}
}

func reconcileSpec() *format.ModelSpec {
	return &format.ModelSpec{Architecture: "llama", Layers: 2, KVHeads: 1, HeadDim: 8, DType: format.DTypeF32,
		RoPE: format.RoPE{Style: format.RoPEInterleaved, Theta: 10000}, WeightsID: "reconcile"}
}

// TestReconcileLostBatches loses the catalog batches of two Puts, a
// Delete of a catalogued packet and a Put-Delete pair, in two blob files:
// Open re-inserts the puts and applies the deletes from the blob log; a
// read-only open before it is refused, one after it opens.
func TestReconcileLostBatches(t *testing.T) {
	spec := reconcileSpec()
	dir := t.TempDir()
	o := &Options{BlobFileSize: 3 * format.Alignment} // a few extents per file
	db := openDisk(t, dir, o)
	kept := map[format.PacketID]*Packet{}
	put := func(i int) format.PacketID {
		p := floatPacket(spec, "ns", 8+i, 0, 0, uint64(i))
		id, err := db.Put(context.Background(), p)
		if err != nil {
			t.Fatal(err)
		}
		kept[id] = p
		return id
	}
	del := func(id format.PacketID) {
		if err := db.Delete(context.Background(), "ns", spec.Fingerprint(), id); err != nil {
			t.Fatal(err)
		}
		delete(kept, id)
	}
	a := put(0)
	put(1)
	db.Close()
	restore := snapshotCatalog(t, dir)
	db = openDisk(t, dir, o)
	put(2)
	del(a)
	c := put(3)
	put(4)
	del(c)
	files := len(db.BlobFiles())
	db.Close()
	restore()

	// Read-only, the records are applied in memory only: the same state,
	// and the next read-write open still has them to apply.
	db = openDisk(t, dir, &Options{ReadOnly: true})
	if s := db.Stats(); !s.ReconciledInMemory || s.Reconciled.Inserted != 3 || s.Reconciled.Deleted != 2 {
		t.Errorf("read-only open: in memory %v, reconciled %+v", s.ReconciledInMemory, s.Reconciled)
	}
	wantPackets(t, db, spec, kept, []format.PacketID{a, c})
	db.Close()
	db = openDisk(t, dir, o)
	r := db.Stats().Reconciled
	if r.Inserted != 3 || r.Deleted != 2 || r.NewFiles == 0 || len(r.Problems) != 0 || len(db.BlobFiles()) != files {
		t.Errorf("reconciled %+v, %d blob files (want %d)", r, len(db.BlobFiles()), files)
	}
	wantPackets(t, db, spec, kept, []format.PacketID{a, c})
	put(5) // the writer appends after the reconciled extents
	wantPackets(t, db, spec, kept, []format.PacketID{a, c})
	db.Close()

	db = openDisk(t, dir, &Options{ReadOnly: true})
	if r := db.Stats().Reconciled; r.Changed() {
		t.Errorf("second open reconciled again: %+v", r)
	}
	wantPackets(t, db, spec, kept, nil)
	db.Close()
}

// TestReconcileFormat10Extents: a packet extent written without a put
// record (as format 1.0 wrote them) cannot be re-inserted; its loss is
// counted in Stats().Reconciled.NoRecord, not silent.
func TestReconcileFormat10Extents(t *testing.T) {
	spec := reconcileSpec()
	dir := t.TempDir()
	db := openDisk(t, dir, nil)
	db.Close()
	restore := snapshotCatalog(t, dir)
	putRecords = false
	db = openDisk(t, dir, nil)
	id, err := db.Put(context.Background(), floatPacket(spec, "ns", 8, 0, 0, 1))
	putRecords = true
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	restore()
	db = openDisk(t, dir, nil)
	defer db.Close()
	if r := db.Stats().Reconciled; r.NoRecord != 1 || r.Changed() {
		t.Errorf("reconciled %+v, want one extent without a record", r)
	}
	if _, err := db.Get(context.Background(), "ns", spec.Fingerprint(), id); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get: %v", err)
	}
}

// TestRecoverAfterCompaction rebuilds, with Recover, the catalog of a store
// that was compacted (extents moved to a new file, put records with them)
// and had deletes: the same packets come back, the deleted ones stay
// deleted, and Check is clean. The old catalog is kept aside.
func TestRecoverAfterCompaction(t *testing.T) {
	spec := reconcileSpec()
	dir := t.TempDir()
	o := &Options{BlobFileSize: 4 * format.Alignment}
	db := openDisk(t, dir, o)
	kept := map[format.PacketID]*Packet{}
	var ids []format.PacketID
	for i := range 8 {
		p := floatPacket(spec, "ns", 8+i, 0, 0, uint64(i))
		id, err := db.Put(context.Background(), p)
		if err != nil {
			t.Fatal(err)
		}
		kept[id] = p
		ids = append(ids, id)
	}
	var gone []format.PacketID
	for _, i := range []int{1, 2, 5} {
		if err := db.Delete(context.Background(), "ns", spec.Fingerprint(), ids[i]); err != nil {
			t.Fatal(err)
		}
		delete(kept, ids[i])
		gone = append(gone, ids[i])
	}
	crep, err := db.Compact(context.Background(), CompactOptions{LiveRatio: 1})
	if err != nil || len(crep.Rewritten) == 0 {
		t.Fatalf("compact: %v %+v", err, crep)
	}
	compacted := slices.Sorted(slices.Values(crep.Rewritten))
	db.Close()
	if err := os.RemoveAll(filepath.Join(dir, catalogDirName, "MANIFEST-000001")); err != nil {
		t.Fatal(err)
	}
	rep, err := Recover(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Inserted != len(kept) || rep.MovedAside == "" || len(rep.Problems) != 0 {
		t.Errorf("recover: %+v", rep)
	}
	if len(rep.GoneFiles) != len(compacted) || (len(compacted) > 0 && rep.GoneFiles[0] != compacted[0]) {
		t.Errorf("recover names gone files %v; compaction removed %v", rep.GoneFiles, compacted)
	}
	if _, err := os.Stat(rep.MovedAside); err != nil {
		t.Errorf("old catalog: %v", err)
	}
	db = openDisk(t, dir, o)
	defer db.Close()
	wantPackets(t, db, spec, kept, gone)
	if _, err := Recover(dir, o); !errors.Is(err, ErrLocked) {
		t.Errorf("Recover of an open store: %v, want ErrLocked", err)
	}
}

func TestRecoverNoStore(t *testing.T) {
	if _, err := Recover(t.TempDir(), nil); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Recover of an empty directory: %v, want ErrNotFound", err)
	}
}

// TestReconcileLostCompaction loses the batch of a compaction that went on
// to remove the files it copied from: the catalog then names files that
// are gone, and Open repoints those packets to the copies, found by their
// put records in the compaction's output files.
func TestReconcileLostCompaction(t *testing.T) {
	spec := reconcileSpec()
	dir := t.TempDir()
	o := &Options{BlobFileSize: 4 * format.Alignment}
	db := openDisk(t, dir, o)
	kept := map[format.PacketID]*Packet{}
	var ids []format.PacketID
	for i := range 8 {
		p := floatPacket(spec, "ns", 8+i, 0, 0, uint64(i))
		id, err := db.Put(context.Background(), p)
		if err != nil {
			t.Fatal(err)
		}
		kept[id] = p
		ids = append(ids, id)
	}
	var gone []format.PacketID
	for _, i := range []int{0, 3} {
		if err := db.Delete(context.Background(), "ns", spec.Fingerprint(), ids[i]); err != nil {
			t.Fatal(err)
		}
		delete(kept, ids[i])
		gone = append(gone, ids[i])
	}
	db.Close()
	restore := snapshotCatalog(t, dir)
	db = openDisk(t, dir, o)
	rep, err := db.Compact(context.Background(), CompactOptions{LiveRatio: 1})
	if err != nil || len(rep.Rewritten) == 0 {
		t.Fatalf("compact: %v %+v", err, rep)
	}
	db.Close()
	for _, num := range rep.Rewritten {
		if _, err := os.Stat(filepath.Join(dir, blobsDirName, fmt.Sprintf("%06d.blob", num))); !os.IsNotExist(err) {
			t.Fatalf("compacted file %06d still on disk (%v): the fixture needs it gone", num, err)
		}
	}
	restore()
	db = openDisk(t, dir, o)
	defer db.Close()
	if r := db.Stats().Reconciled; r.Repointed == 0 || len(r.Problems) != 0 {
		t.Errorf("reconciled %+v", r)
	}
	wantPackets(t, db, spec, kept, gone)
}
