package store

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/kvstore/kvstore/format"
)

// loseCatalog closes db and removes its catalog's MANIFEST, as a lost
// catalog: only Recover opens the store again.
func loseCatalog(t *testing.T, db *DB, dir string) {
	t.Helper()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(dir, catalogDirName, "MANIFEST-000001")); err != nil {
		t.Fatal(err)
	}
}

// TestRecoverAfterEviction evicts packets for MaxBytes (several at once),
// re-puts one evicted packet, deletes a packet and puts it again, loses the
// catalog and recovers it: the evicted packets stay gone, the others (the
// re-put ones included) come back bit for bit.
func TestRecoverAfterEviction(t *testing.T) {
	spec := reconcileSpec()
	dir := t.TempDir()
	o := &Options{BlobFileSize: 8 * format.Alignment}
	ctx := context.Background()
	p := func(i int) *Packet { return floatPacket(spec, "ns", 8+12*i, 0, 0, uint64(i)) }
	db := openDisk(t, dir, o)
	id0, err := db.Put(ctx, p(0))
	if err != nil {
		t.Fatal(err)
	}
	extent := db.Stats().LiveBytes
	db.Close()
	o.MaxBytes = int64(5 * extent) // the packets grow: later Puts evict several
	db = openDisk(t, dir, o)
	index := map[format.PacketID]int{id0: 0}
	var most uint64
	for i := 1; i < 6; i++ {
		before := db.Stats().Evictions
		id, err := db.Put(ctx, p(i))
		if err != nil {
			t.Fatal(err)
		}
		index[id] = i
		most = max(most, db.Stats().Evictions-before)
	}
	if most < 2 {
		t.Fatalf("at most %d evictions for one Put: the test wants several at once", most)
	}
	back := -1 // the first packet evicted is put again: it must survive the rebuild
	for id, i := range index {
		if ok, err := db.Has(ctx, "ns", spec.Fingerprint(), id); err != nil {
			t.Fatal(err)
		} else if !ok && (back < 0 || i < back) {
			back = i
		}
	}
	backID, err := db.Put(ctx, p(back))
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Delete(ctx, "ns", spec.Fingerprint(), backID); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Put(ctx, p(back)); err != nil {
		t.Fatal(err)
	}
	kept := map[format.PacketID]*Packet{}
	var gone []format.PacketID
	for id, i := range index {
		if ok, err := db.Has(ctx, "ns", spec.Fingerprint(), id); err != nil {
			t.Fatal(err)
		} else if ok {
			kept[id] = p(i)
		} else {
			gone = append(gone, id)
		}
	}
	if _, ok := kept[backID]; !ok || len(gone) < 2 || len(kept) < 2 {
		t.Fatalf("%d packets kept, %d evicted (%d evictions)", len(kept), len(gone), db.Stats().Evictions)
	}
	t.Logf("%d evictions (%d at once at most), %d kept, %d gone", db.Stats().Evictions, most, len(kept), len(gone))
	loseCatalog(t, db, dir)
	rep, err := Recover(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Problems) != 0 {
		t.Errorf("recover problems: %v", rep.Problems)
	}
	db = openDisk(t, dir, o)
	defer db.Close()
	wantPackets(t, db, spec, kept, gone)
}

// TestAppendTombstonesRejects: no tombstone, or a count that does not match
// the packets, is a caller's bug that writes nothing.
func TestAppendTombstonesRejects(t *testing.T) {
	dir := t.TempDir()
	db := openDisk(t, dir, nil)
	defer db.Close()
	before := db.BlobFiles()
	for _, c := range []struct {
		ts []*format.Tombstone
		hs []*format.PacketHeader
	}{{nil, nil}, {[]*format.Tombstone{{}}, nil}} {
		if err := db.appendTombstones(c.ts, c.hs, nil); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("%d tombstones for %d packets: %v, want ErrInvalidArgument", len(c.ts), len(c.hs), err)
		}
	}
	if after := db.BlobFiles(); len(after) != len(before) || (len(after) > 0 && after[len(after)-1].Size != before[len(before)-1].Size) {
		t.Errorf("blob files changed: %+v, were %+v", after, before)
	}
}
