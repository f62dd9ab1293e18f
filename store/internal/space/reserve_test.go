package space

import (
	"errors"
	"log/slog"
	"strings"
	"syscall"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// usageFS is an in-memory FS that reports free bytes as set.
type usageFS struct {
	vfs.FS
	free  uint64
	frees bool // Remove adds what the file held to free
}

func (u *usageFS) GetDiskUsage(string) (vfs.DiskUsage, error) {
	return vfs.DiskUsage{AvailBytes: u.free, TotalBytes: 1 << 40}, nil
}

func (u *usageFS) Remove(name string) error {
	st, err := u.FS.Stat(name)
	if err == nil && u.frees {
		u.free += uint64(st.Size())
	}
	return u.FS.Remove(name)
}

var quiet = slog.New(slog.DiscardHandler)

const size = 4 << 20

// sizes are a reserve of size bytes, 2 MiB of headroom and a 1 MiB floor.
var sizes = Sizes{Reserve: size, Headroom: 2 << 20, Floor: 1 << 20}

func setup(t *testing.T, free uint64) (*usageFS, string) {
	t.Helper()
	fs := &usageFS{FS: vfs.NewMem(), free: free}
	for _, d := range []string{"/s", "/s/catalog"} {
		if err := fs.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return fs, "/s"
}

func fileSize(t *testing.T, fs vfs.FS, path string) int64 {
	t.Helper()
	st, err := fs.Stat(path)
	if err != nil {
		return -1
	}
	return st.Size()
}

// A store opened with room keeps no hold; Restore creates RESERVE, and a
// later Release on a nearly full disk removes it and holds new data.
func TestReserveReleaseAndRestore(t *testing.T) {
	fs, dir := setup(t, 1<<30)
	var r Reserve
	if err := r.Release(fs, dir, sizes, dir+"/catalog", quiet); err != nil {
		t.Fatal(err)
	}
	if !r.Held() || r.Hold() == nil || r.Bytes() != 0 {
		t.Fatalf("no RESERVE yet: held %v (%v), bytes %d; want held until Restore", r.Held(), r.Hold(), r.Bytes())
	}
	r.Restore()
	if r.Held() || r.Hold() != nil || r.Bytes() != size || fileSize(t, fs, dir+"/"+FileName) != size {
		t.Fatalf("after Restore: held %v, bytes %d, file %d; want %d, not held", r.Held(), r.Bytes(), fileSize(t, fs, dir+"/"+FileName), size)
	}

	fs.free = 2 << 20 // below the reserve's size, above what the catalog needs to open (1 MiB)
	var r1 Reserve
	if err := r1.Release(fs, dir, sizes, dir+"/catalog", quiet); err != nil {
		t.Fatalf("Release with %d free: %v, want the reserve released and the open allowed", fs.free, err)
	}
	if fileSize(t, fs, dir+"/"+FileName) != -1 || !r1.Held() || r1.Bytes() != 0 {
		t.Fatalf("RESERVE %d bytes, held %v: want it removed and the hold on", fileSize(t, fs, dir+"/"+FileName), r1.Held())
	}
	if err := Write(fs, dir+"/"+FileName, size); err != nil {
		t.Fatal(err)
	}
	fs.free = 1 << 19 // below what the catalog needs to open too
	var r2 Reserve
	err := r2.Release(fs, dir, sizes, dir+"/catalog", quiet)
	if !errors.Is(err, ErrNoSpace) || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Release with %d free: %v, want ErrNoSpace and ENOSPC (the catalog needs 1 MiB)", fs.free, err)
	}
	if fileSize(t, fs, dir+"/"+FileName) != -1 || !r2.Held() {
		t.Fatalf("RESERVE %d bytes, held %v: want it removed and the hold on", fileSize(t, fs, dir+"/"+FileName), r2.Held())
	}
	hold := r2.Hold()
	if !errors.Is(hold, ErrNoSpace) || !errors.Is(hold, syscall.ENOSPC) || !strings.Contains(hold.Error(), FileName) {
		t.Fatalf("hold %v, want ErrNoSpace and ENOSPC naming %s", hold, FileName)
	}
	r2.Restore() // still no room twice over: stays held
	if !r2.Held() || r2.Bytes() != 0 {
		t.Fatalf("Restore without room: held %v, bytes %d", r2.Held(), r2.Bytes())
	}
	fs.free = 2 * size
	r2.Restore()
	if r2.Held() || r2.Bytes() != size {
		t.Fatalf("Restore with room for it twice: held %v, bytes %d", r2.Held(), r2.Bytes())
	}
}

// The catalog's WAL files count towards what it needs to open.
func TestReserveOpenNeedCountsWAL(t *testing.T) {
	fs, dir := setup(t, 2<<20)
	f, err := fs.Create(dir+"/catalog/000001.log", vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(make([]byte, 1<<20)); err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	var r Reserve
	if err := r.Release(fs, dir, sizes, dir+"/catalog", quiet); err != nil {
		t.Fatalf("2 MiB free for a 1 MiB WAL: %v", err)
	}
	g, _ := fs.Create(dir+"/catalog/000002.log", vfs.WriteCategoryUnspecified)
	_, _ = g.Write(make([]byte, 1))
	_ = g.Close()
	if err := r.Release(fs, dir, sizes, dir+"/catalog", quiet); !errors.Is(err, ErrNoSpace) {
		t.Fatalf("2 MiB free for 1 MiB + 1 B of WAL and 1 MiB of slack: %v, want ErrNoSpace", err)
	}
}

// On a FS with no disk usage (the in-memory one) nothing is tracked or held.
func TestReserveUntracked(t *testing.T) {
	fs := vfs.NewMem()
	var r Reserve
	if err := r.Release(fs, "/", sizes, "/catalog", quiet); err != nil {
		t.Fatal(err)
	}
	r.Restore()
	if r.Held() || r.Hold() != nil || r.Bytes() != 0 {
		t.Fatalf("untracked: held %v, bytes %d", r.Held(), r.Bytes())
	}
	if _, err := fs.Stat("/" + FileName); err == nil {
		t.Fatal("RESERVE created on a FS that reports no usage")
	}
}

// Write makes a file of the size asked.
func TestWrite(t *testing.T) {
	fs := vfs.NewMem()
	if err := Write(fs, "/r", 3<<20+5); err != nil {
		t.Fatal(err)
	}
	if got := fileSize(t, fs, "/r"); got != 3<<20+5 {
		t.Fatalf("size %d", got)
	}
}

func TestNoSpace(t *testing.T) {
	plain := errors.New("boom")
	wrapped := NoSpace(syscall.ENOSPC)
	text := NoSpace(errors.New("pebble: fatal: write: " + syscall.ENOSPC.Error()))
	switch {
	case NoSpace(nil) != nil:
		t.Error("NoSpace(nil) is not nil")
	case NoSpace(plain) != plain:
		t.Error("an unrelated error was wrapped")
	case !errors.Is(wrapped, ErrNoSpace) || !errors.Is(wrapped, syscall.ENOSPC):
		t.Errorf("ENOSPC: %v", wrapped)
	case !errors.Is(text, ErrNoSpace) || !errors.Is(text, syscall.ENOSPC):
		t.Errorf("ENOSPC as text: %v", text)
	case NoSpace(wrapped) != wrapped:
		t.Error("an ErrNoSpace error was wrapped again")
	}
}
