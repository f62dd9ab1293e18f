package store

import (
	"context"
	"errors"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/internal/testenv"
	"github.com/kvstore/kvstore/store/internal/space"
)

// spacePacket is a packet with a 512 KiB extent.
func spacePacket(seed uint64) *Packet {
	return randPacket(testSpec(format.DTypeBF16, 4, 4, 64), "ns", 128, seed)
}

// spaceOptions make the reserve 5 MiB and the headroom 3 MiB (a 1 MiB
// memtable: space.For), so that a 16 MiB disk holds some packets besides.
func spaceOptions() *Options {
	return &Options{Logger: quiet, CatalogMemTableSize: 1 << 20, BlobFileSize: 2 << 20}
}

// spaceSizes are the sizes spaceOptions give.
var spaceSizes = space.For(1 << 20)

// openWithin opens dir, failing t if Open takes longer than d (it used to
// hang forever on a full disk).
func openWithin(t *testing.T, dir string, o *Options, d time.Duration) (*DB, error) {
	t.Helper()
	type result struct {
		db  *DB
		err error
	}
	done := make(chan result, 1)
	start := time.Now()
	go func() {
		db, err := Open(dir, o)
		done <- result{db, err}
	}()
	select {
	case r := <-done:
		t.Logf("Open took %v", time.Since(start).Round(time.Millisecond))
		return r.db, r.err
	case <-time.After(d):
		t.Fatalf("Open of %s did not return within %v", dir, d)
		return nil, nil
	}
}

// fillStore puts packets until the disk is full, checking the error.
func fillStore(t *testing.T, db *DB) []format.PacketID {
	t.Helper()
	var ids []format.PacketID
	for n := 0; ; n++ {
		id, err := db.Put(context.Background(), spacePacket(uint64(n)))
		if err != nil {
			if !errors.Is(err, ErrNoSpace) || !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("Put %d on a full disk: %v, want ErrNoSpace and ENOSPC", n, err)
			}
			t.Logf("disk full after %d packets: %v", n, err)
			return ids
		}
		ids = append(ids, id)
		if n > 100 {
			t.Fatal("a 16 MiB disk took 100 packets of 512 KiB")
		}
	}
}

// TestFullDiskReserve fills a real 16 MiB file system (Puts stop at the
// headroom, the reserve kept), then checks that Open returns in under 5 s (the reserve makes room for the catalog to
// open), new data is held with ErrNoSpace while Compact still runs, and
// deleting every packet and GC empty the store (the active file, all
// dead, rolled and removed), end the hold and re-create the reserve,
// after which Puts work again.
func TestFullDiskReserve(t *testing.T) {
	dir := testenv.SmallFS(t, 16<<20) + "/store"
	db, err := Open(dir, spaceOptions())
	if err != nil {
		t.Fatal(err)
	}
	if st := db.Stats(); st.ReserveBytes != uint64(spaceSizes.Reserve) || st.SpaceHeld {
		t.Fatalf("fresh store: reserve %d, held %v; want %d, not held", st.ReserveBytes, st.SpaceHeld, spaceSizes.Reserve)
	}
	ids := fillStore(t, db)
	if st := db.Stats(); st.ReserveBytes != uint64(spaceSizes.Reserve) || st.SpaceHeld {
		t.Fatalf("after the refused Put: reserve %d, held %v; want it kept", st.ReserveBytes, st.SpaceHeld)
	}
	if err := db.Close(); err != nil {
		t.Fatalf("Close after the disk filled: %v", err)
	}

	db, err = openWithin(t, dir, spaceOptions(), 5*time.Second)
	if err != nil {
		t.Fatalf("Open of a full store: %v", err)
	}
	defer db.Close()
	if st := db.Stats(); st.ReserveBytes != 0 || !st.SpaceHeld {
		t.Fatalf("full store: reserve %d, held %v; want released and held", st.ReserveBytes, st.SpaceHeld)
	}
	if _, err := db.Put(context.Background(), spacePacket(1000)); !errors.Is(err, ErrNoSpace) {
		t.Fatalf("Put while held: %v, want ErrNoSpace", err)
	}
	if _, err := db.Compact(t.Context(), CompactOptions{}); err != nil {
		t.Fatalf("Compact while held (nothing to rewrite): %v", err)
	}
	fp := spacePacket(0).Model.Fingerprint()
	for _, id := range ids {
		if err := db.Delete(context.Background(), "ns", fp, id); err != nil {
			t.Fatalf("Delete on a full store: %v", err)
		}
	}
	rep, err := db.GC(t.Context(), GCOptions{})
	if err != nil {
		t.Fatalf("GC on a full store: %v", err)
	}
	t.Logf("GC: files removed %v, %d bytes reclaimed", rep.FilesRemoved, rep.BytesReclaimed)
	st := db.Stats()
	if st.Packets != 0 || st.ReserveBytes != uint64(spaceSizes.Reserve) || st.SpaceHeld || len(st.BlobFiles) != 0 {
		t.Fatalf("after rm and gc: %d packets, reserve %d, held %v, %d blob files; want 0, %d, not held, none",
			st.Packets, st.ReserveBytes, st.SpaceHeld, len(st.BlobFiles), spaceSizes.Reserve)
	}
	if _, err := db.Put(context.Background(), spacePacket(1000)); err != nil {
		t.Fatalf("Put after gc freed the disk: %v", err)
	}
}

// TestFullDiskNoReserve fills the disk with a file the store does not
// own, so that even without its reserve the catalog has no room: Open must
// fail fast with ErrNoSpace, not hang in Pebble's flush retries, and open
// once the room is back.
func TestFullDiskNoReserve(t *testing.T) {
	mnt := testenv.SmallFS(t, 16<<20)
	dir := mnt + "/store"
	db, err := Open(dir, spaceOptions())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Put(context.Background(), spacePacket(0)); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	// A store from before the reserve, or one whose reserve is already
	// spent: no RESERVE to release.
	if err := os.Remove(dir + "/" + space.FileName); err != nil {
		t.Fatal(err)
	}
	fill := mnt + "/filler"
	f, err := os.Create(fill)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{1 << 20, 4 << 10} { // then the last pages
		for err == nil {
			_, err = f.Write(make([]byte, n))
		}
		if !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("filling the disk: %v", err)
		}
		err = nil
	}
	f.Close()
	_, err = openWithin(t, dir, spaceOptions(), 5*time.Second)
	if !errors.Is(err, ErrNoSpace) {
		t.Fatalf("Open on a full disk: %v, want ErrNoSpace", err)
	}
	t.Logf("Open on a full disk: %v", err)
	if err := os.Remove(fill); err != nil {
		t.Fatal(err)
	}
	db, err = openWithin(t, dir, spaceOptions(), 5*time.Second)
	if err != nil {
		t.Fatalf("Open once room is back: %v", err)
	}
	defer db.Close()
	if st := db.Stats(); st.Packets != 1 || st.ReserveBytes != uint64(spaceSizes.Reserve) {
		t.Fatalf("reopened: %d packets, reserve %d; want 1, %d", st.Packets, st.ReserveBytes, spaceSizes.Reserve)
	}
}

// TestFullDiskRefill fills a real 32 MiB file system through one store
// handle until Put reports ErrNoSpace, deletes every other packet, runs GC
// and Compact, and Puts again: the deleted room comes back without a
// restart. Compact takes the reserve's room for its copies (the headroom
// alone does not hold one) and GC or Compact re-create the reserve once
// the room they freed allows, so the hold ends.
func TestFullDiskRefill(t *testing.T) {
	dir := testenv.SmallFS(t, 32<<20) + "/store"
	o := spaceOptions()
	o.BlobFileSize = DefaultBlobFileSize // sealed at 2 MiB: a sixteenth of the disk
	db, err := Open(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ids := fillStore(t, db)
	if len(ids) < 20 {
		t.Fatalf("%d packets fill the disk", len(ids))
	}
	fp := spacePacket(0).Model.Fingerprint()
	for i := 0; i < len(ids); i += 2 {
		if err := db.Delete(context.Background(), "ns", fp, ids[i]); err != nil {
			t.Fatalf("Delete %d: %v", i, err)
		}
	}
	if _, err := db.Put(context.Background(), spacePacket(1000)); !errors.Is(err, ErrNoSpace) {
		t.Fatalf("Put before GC and Compact: %v, want ErrNoSpace (nothing reclaimed yet)", err)
	}
	gc, err := db.GC(t.Context(), GCOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := db.Compact(t.Context(), CompactOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("gc reclaimed %d bytes; compact rewrote %v, reclaimed %d bytes, skipped %+v", gc.BytesReclaimed, rep.Rewritten, rep.BytesReclaimed, rep.Skipped)
	if len(rep.Rewritten) == 0 || len(rep.Skipped) != 0 {
		t.Fatalf("compact of files a third live rewrote %v, skipped %+v", rep.Rewritten, rep.Skipped)
	}
	if st := db.Stats(); st.SpaceHeld || st.ReserveBytes != uint64(spaceSizes.Reserve) {
		t.Fatalf("after gc and compact: held %v, reserve %d; want the reserve back", st.SpaceHeld, st.ReserveBytes)
	}
	for n := range 3 {
		if _, err := db.Put(context.Background(), spacePacket(uint64(2000+n))); err != nil {
			t.Fatalf("Put %d after gc and compact freed room: %v", n, err)
		}
	}
	wantClean(t, db, "refilled")
}
