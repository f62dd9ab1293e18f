package space

import (
	"errors"
	"syscall"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// kept opens a tracked reserve on fs with RESERVE written, as Open leaves
// it on a disk with room.
func kept(t *testing.T, fs *usageFS, dir string) *Reserve {
	t.Helper()
	free := fs.free
	fs.free = 1 << 30
	var r Reserve
	if err := r.Release(fs, dir, sizes, dir+"/catalog", quiet); err != nil {
		t.Fatal(err)
	}
	r.Restore()
	if r.Held() || r.Bytes() != size {
		t.Fatalf("RESERVE not written: held %v, bytes %d", r.Held(), r.Bytes())
	}
	fs.free = free
	return &r
}

// Room lets new data through while it leaves the headroom free, refuses
// the write that would not and keeps RESERVE (it is for the next Open and
// for deletes); it refuses everything while the reserve is released.
func TestReserveRoom(t *testing.T) {
	fs, dir := setup(t, 1<<30)
	r := kept(t, fs, dir)
	if err := r.Room(1 << 20); err != nil {
		t.Fatalf("Room with 1 GiB free: %v", err)
	}
	fs.free = sizes.Headroom + 1<<20
	if err := r.Room(1 << 20); err != nil {
		t.Fatalf("Room leaving exactly the headroom: %v", err)
	}
	err := r.Room(1<<20 + 1)
	if !errors.Is(err, ErrNoSpace) || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Room that would eat the headroom: %v, want ErrNoSpace and ENOSPC", err)
	}
	if r.Held() || r.Bytes() != size || fileSize(t, fs, dir+"/"+FileName) != size {
		t.Fatalf("after the refusal: held %v, bytes %d, RESERVE %d; want it kept", r.Held(), r.Bytes(), fileSize(t, fs, dir+"/"+FileName))
	}
	fs.free = 0
	if err := r.CatalogRoom(100); !errors.Is(err, ErrNoSpace) || !r.Held() {
		t.Fatalf("CatalogRoom on a full disk: %v, held %v; want the reserve released and still no room", err, r.Held())
	}
	fs.free = 1 << 30
	if err := r.Room(1); !errors.Is(err, ErrNoSpace) {
		t.Fatalf("Room while held: %v, want the hold", err)
	}
	r.Restore()
	if err := r.Room(1 << 20); err != nil || r.Held() {
		t.Fatalf("Room after Restore: %v (held %v)", err, r.Held())
	}
}

// CatalogRoom lets a tombstone through down to the floor, keeping the
// reserve; below the floor it releases RESERVE (room for the catalog),
// and refuses only if that is not enough.
func TestReserveCatalogRoom(t *testing.T) {
	fs, dir := setup(t, 1<<30)
	r := kept(t, fs, dir)
	fs.free = sizes.Floor + 4096
	if err := r.CatalogRoom(4096); err != nil || r.Held() {
		t.Fatalf("CatalogRoom at the floor: %v, held %v", err, r.Held())
	}
	fs.free = sizes.Floor + 4095
	err := r.CatalogRoom(4096)
	if !errors.Is(err, ErrNoSpace) || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("CatalogRoom below the floor: %v, want ErrNoSpace and ENOSPC", err)
	}
	if !r.Held() || fileSize(t, fs, dir+"/"+FileName) != -1 {
		t.Fatal("CatalogRoom below the floor kept RESERVE")
	}
}

// Fits answers for a compaction's copy and releases nothing.
func TestReserveFits(t *testing.T) {
	fs, dir := setup(t, 1<<30)
	r := kept(t, fs, dir)
	fs.free = sizes.Headroom + 1000
	if free, ok := r.Fits(1000); !ok || free != fs.free {
		t.Fatalf("Fits(1000) with headroom+1000 free: %d, %v", free, ok)
	}
	if _, ok := r.Fits(1001); ok {
		t.Fatal("Fits(1001) with headroom+1000 free")
	}
	if r.Held() || r.Bytes() != size {
		t.Fatal("Fits released the reserve")
	}
	var untracked Reserve
	if _, ok := untracked.Fits(1 << 62); !ok {
		t.Fatal("an untracked reserve refused a copy")
	}
}

// CopyRoom releases the reserve when that is what a compaction's copy
// needs, and only then.
func TestReserveCopyRoom(t *testing.T) {
	fs, dir := setup(t, 1<<30)
	r := kept(t, fs, dir)
	fs.free, fs.frees = sizes.Headroom+1000, true
	if _, ok := r.CopyRoom(1000); !ok || r.Held() {
		t.Fatalf("a copy that fits: ok %v, held %v", ok, r.Held())
	}
	if _, ok := r.CopyRoom(1000 + size + 1); ok || r.Held() {
		t.Fatalf("a copy the reserve would not make room for: ok %v, held %v", ok, r.Held())
	}
	if _, ok := r.CopyRoom(1000 + size); !ok || !r.Held() || fileSize(t, fs, dir+"/"+FileName) != -1 {
		t.Fatalf("a copy the reserve makes room for: ok %v, held %v; want the reserve released", ok, r.Held())
	}
}

// The sizes grow with the memtable, and the reserve covers what the
// catalog can need to open after a full disk: the WAL of the two
// memtables Pebble holds before it stalls, two recycled WAL files, slack.
func TestSizesFor(t *testing.T) {
	for _, m := range []uint64{1 << 20, 4 << 20, 64 << 20} {
		s := For(m)
		if s.Reserve != int64(4*m+slack) || s.Headroom != 2*m+slack || s.Floor != slack {
			t.Errorf("For(%d) = %+v", m, s)
		}
		if m > 4<<20 {
			continue // the same arithmetic; spare the memory
		}
		fs, dir := setup(t, uint64(s.Reserve))
		for i, n := range []uint64{m, m, m / 2, m / 2} { // 2 live, 2 recycled
			f, err := fs.Create(fs.PathJoin(dir, "catalog", string(rune('a'+i))+".log"), vfs.WriteCategoryUnspecified)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = f.Write(make([]byte, n))
			_ = f.Close()
		}
		var r Reserve
		if err := r.Release(fs, dir, s, dir+"/catalog", quiet); err != nil {
			t.Errorf("memtable %d: the reserve's room does not open the catalog: %v", m, err)
		}
	}
}

func TestSealSize(t *testing.T) {
	for _, c := range []struct{ total, limit, want uint64 }{
		{0, 1 << 30, 1 << 30},        // unknown disk
		{1 << 40, 1 << 30, 1 << 30},  // a big disk: the option
		{64 << 20, 1 << 30, 4 << 20}, // a small one: a sixteenth
		{128 << 10, 1 << 30, 16384},  // never below the least
	} {
		if got := SealSize(c.total, c.limit, 16384); got != c.want {
			t.Errorf("SealSize(%d, %d) = %d, want %d", c.total, c.limit, got, c.want)
		}
	}
}

func TestCatalogBusy(t *testing.T) {
	const m = 1 << 20
	var idle, queued, l0 pebble.Metrics
	idle.MemTable.Size = m / 2
	queued.MemTable.Size = 2*m - 100
	l0.Levels[0].Sublevels = l0StopWrites - 1
	switch {
	case CatalogBusy(&idle, m, 4096):
		t.Error("a half-full memtable is busy")
	case !CatalogBusy(&queued, m, 4096):
		t.Error("two memtables waiting on a flush are not busy")
	case !CatalogBusy(&l0, m, 0):
		t.Error("level 0 at the stop threshold is not busy")
	}
}
