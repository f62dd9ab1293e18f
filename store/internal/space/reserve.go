package space

import (
	"errors"
	"fmt"
	iofs "io/fs"
	"log/slog"
	"strings"
	"sync/atomic"
	"syscall"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// FileName is the reserve's name in the store's directory.
const FileName = "RESERVE"

// Reserve is a store's space reserve, the hold on new data while it is
// released, and the checks that keep room on the disk for the catalog
// (Sizes). The zero value is untracked (no reserve, every check passes)
// until Release. The store changes it holding its writer lock (or while
// opening); Bytes and Held may be read at any time.
type Reserve struct {
	fs      vfs.FS
	dir     string
	sizes   Sizes
	log     *slog.Logger
	tracked bool         // the FS reports disk usage: the reserve is kept
	total   uint64       // the disk's size, read by Release
	bytes   atomic.Int64 // bytes RESERVE holds now
	held    atomic.Bool  // RESERVE is missing: new data is refused
}

// Path is RESERVE's path.
func (r *Reserve) Path() string { return r.fs.PathJoin(r.dir, FileName) }

// Bytes is what RESERVE holds now: 0 when released or untracked.
func (r *Reserve) Bytes() int64 { return r.bytes.Load() }

// Held reports whether new data is refused for lack of the reserve.
func (r *Reserve) Held() bool { return r.held.Load() }

// Sizes are the sizes Release was given.
func (r *Reserve) Sizes() Sizes { return r.sizes }

// Total is the size of the disk the store is on (0 when untracked).
func (r *Reserve) Total() uint64 { return r.total }

// Hold is the error new data is refused with while the reserve is
// released (wrapping ErrNoSpace and syscall.ENOSPC); nil otherwise.
func (r *Reserve) Hold() error {
	if !r.held.Load() {
		return nil
	}
	return fmt.Errorf("%w: disk nearly full: the store's space reserve (%s) is released, so new data is refused; delete data and run GC to free room: %w",
		ErrNoSpace, r.Path(), syscall.ENOSPC)
}

// Release runs before the catalog opens on a read-write Open of the store
// in dir on fs, with the catalog in catalogDir: on a nearly full disk
// (less free than the reserve's size) it removes RESERVE, then refuses to
// go on (ErrNoSpace) if the catalog still has no room to open, rather
// than let Pebble retry its flush forever. On a FS that reports no disk
// usage it does nothing: the reserve stays untracked.
func (r *Reserve) Release(fs vfs.FS, dir string, sizes Sizes, catalogDir string, log *slog.Logger) error {
	r.fs, r.dir, r.sizes, r.log = fs, dir, sizes, log
	u, err := fs.GetDiskUsage(dir)
	if err != nil {
		return nil // no usage to read (an in-memory FS): no reserve
	}
	r.tracked, r.total = true, u.TotalBytes
	have := int64(0)
	if st, err := fs.Stat(r.Path()); err == nil {
		have = st.Size()
	}
	r.bytes.Store(have)
	r.held.Store(have == 0)
	if have > 0 && u.AvailBytes < uint64(sizes.Reserve) {
		if err := r.release(u.AvailBytes); err != nil {
			return err
		}
		if u, err = fs.GetDiskUsage(dir); err != nil {
			return fmt.Errorf("store: disk usage of %s: %w", dir, err)
		}
	}
	if need := openNeed(fs, catalogDir); u.AvailBytes < need {
		return fmt.Errorf("%w: open %s: %d bytes free, the catalog needs about %d to open (its WAL and a new one): free space on this disk and retry: %w",
			ErrNoSpace, dir, u.AvailBytes, need, syscall.ENOSPC)
	}
	return nil
}

// release removes RESERVE and holds new data; free is what the disk had
// free, for the log.
func (r *Reserve) release(free uint64) error {
	have := r.bytes.Load()
	if err := r.fs.Remove(r.Path()); err != nil && !errors.Is(err, iofs.ErrNotExist) {
		return NoSpace(fmt.Errorf("store: remove %s: %w", r.Path(), err))
	}
	r.bytes.Store(0)
	r.held.Store(true)
	r.log.Warn("store: disk nearly full: released the space reserve; new data is refused until deletes and GC free room",
		"dir", r.dir, "free", free, "reserve", have)
	return nil
}

// openNeed is about what the catalog in dir writes to open: its WAL files
// flushed to tables, plus slack.
func openNeed(fs vfs.FS, dir string) uint64 {
	names, _ := fs.List(dir)
	need := uint64(slack)
	for _, n := range names {
		if strings.HasSuffix(n, ".log") {
			if st, err := fs.Stat(fs.PathJoin(dir, n)); err == nil {
				need += uint64(st.Size())
			}
		}
	}
	return need
}

// free reads the disk's free bytes; ok is false when untracked or
// unreadable (then every check passes: an error of the write itself still
// says the disk is full).
func (r *Reserve) free() (uint64, bool) {
	if !r.tracked {
		return 0, false
	}
	u, err := r.fs.GetDiskUsage(r.dir)
	if err != nil {
		return 0, false
	}
	return u.AvailBytes, true
}

// Room runs before n bytes of new data go to the blob log: it returns
// Hold while the reserve is released, and otherwise refuses the data
// (ErrNoSpace) when writing it would leave the disk less than Headroom
// free, so that the catalog can always flush the memtables it holds.
// RESERVE stays: it is for the next Open, and for deletes if the disk
// fills anyway (CatalogRoom).
func (r *Reserve) Room(n uint64) error {
	if err := r.Hold(); err != nil {
		return err
	}
	free, ok := r.free()
	if !ok || free >= n+r.sizes.Headroom {
		return nil
	}
	return fmt.Errorf("%w: disk nearly full: %d bytes would leave %d free, less than the %d the store keeps for its catalog; delete data and run GC to free room: %w",
		ErrNoSpace, n, free-min(free, n), r.sizes.Headroom, syscall.ENOSPC)
}

// CatalogRoom runs before a write that frees room (a Delete's tombstone,
// n bytes, and its catalog batch): it refuses (ErrNoSpace) only when the
// disk has less than n plus Floor free, since Pebble cannot survive a full
// WAL. Below that it first releases the reserve, which is there for this
// (and holds new data until GC restores it).
func (r *Reserve) CatalogRoom(n uint64) error {
	free, ok := r.free()
	if !ok || free >= n+r.sizes.Floor {
		return nil
	}
	if r.bytes.Load() > 0 {
		if err := r.release(free); err != nil {
			return err
		}
		if free, ok = r.free(); !ok || free >= n+r.sizes.Floor {
			return nil
		}
	}
	return fmt.Errorf("%w: disk full: %d bytes free, the catalog needs %d to commit safely: free space on this disk: %w",
		ErrNoSpace, free, n+r.sizes.Floor, syscall.ENOSPC)
}

// Fits reports whether a write of n bytes leaves the disk Headroom free,
// and what is free; untracked, it always fits. It releases nothing.
func (r *Reserve) Fits(n uint64) (free uint64, ok bool) {
	free, tracked := r.free()
	return free, !tracked || free >= n+r.sizes.Headroom
}

// CopyRoom is Fits for a compaction's copy of n bytes, which frees more
// than it takes: when only the reserve stands in its way, it releases the
// reserve (holding new data until GC restores it) and lets the copy
// through. free is what is free once it is done.
func (r *Reserve) CopyRoom(n uint64) (free uint64, ok bool) {
	free, ok = r.Fits(n)
	if ok || r.bytes.Load() == 0 || free+uint64(r.bytes.Load()) < n+r.sizes.Headroom {
		return free, ok
	}
	if r.release(free) != nil {
		return free, false
	}
	return r.Fits(n)
}

// Restore re-creates RESERVE if it is missing and the disk has room for
// it twice over, ending the hold. Open (at its end) and GC call it; a
// failure leaves the hold on and is logged, never returned.
func (r *Reserve) Restore() {
	if !r.tracked || r.bytes.Load() > 0 {
		return
	}
	u, err := r.fs.GetDiskUsage(r.dir)
	if err != nil || u.AvailBytes < 2*uint64(r.sizes.Reserve) {
		return
	}
	if err := Write(r.fs, r.Path(), r.sizes.Reserve); err != nil {
		_ = r.fs.Remove(r.Path())
		r.log.Warn("store: could not re-create the space reserve", "dir", r.dir, "err", err)
		return
	}
	r.bytes.Store(r.sizes.Reserve)
	r.held.Store(false)
}

// Write creates a file of size bytes whose blocks are allocated:
// preallocated where the FS can, else written as zeros. It is not synced:
// a reserve lost in a crash is re-created by the next Open.
func Write(fs vfs.FS, path string, size int64) error {
	f, err := fs.Create(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		return err
	}
	err = f.Preallocate(0, size) // keeps the size: the last byte sets it
	if err == nil {
		_, err = f.WriteAt([]byte{0}, size-1)
	}
	if err == nil && !allocated(f, size) {
		err = writeZeros(f, size)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func writeZeros(f vfs.File, size int64) error {
	zero := make([]byte, 1<<20)
	for off := int64(0); off < size; off += int64(len(zero)) {
		if _, err := f.WriteAt(zero[:min(int64(len(zero)), size-off)], off); err != nil {
			return err
		}
	}
	return nil
}
