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

// openSlack is what the catalog needs to open besides room to flush its
// WAL files: a new WAL, a manifest record, an OPTIONS file.
const openSlack = 1 << 20

// Reserve is a store's space reserve and the hold on new data while it is
// released. The zero value is untracked (no reserve) until Release. The
// store changes it holding its writer lock (or while opening); Bytes and
// Held may be read at any time.
type Reserve struct {
	fs      vfs.FS
	dir     string
	size    int64
	tracked bool         // the FS reports disk usage: the reserve is kept
	bytes   atomic.Int64 // bytes RESERVE holds now
	held    atomic.Bool  // RESERVE is missing: new data is refused
}

// Path is RESERVE's path.
func (r *Reserve) Path() string { return r.fs.PathJoin(r.dir, FileName) }

// Bytes is what RESERVE holds now: 0 when released or untracked.
func (r *Reserve) Bytes() int64 { return r.bytes.Load() }

// Held reports whether new data is refused for lack of the reserve.
func (r *Reserve) Held() bool { return r.held.Load() }

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
// in dir on fs, with a reserve of size bytes and the catalog in
// catalogDir: on a nearly full disk it removes RESERVE, then refuses to
// go on (ErrNoSpace) if the catalog still has no room to open, rather
// than let Pebble retry its flush forever. On a FS that reports no disk
// usage it does nothing: the reserve stays untracked.
func (r *Reserve) Release(fs vfs.FS, dir string, size int64, catalogDir string, log *slog.Logger) error {
	r.fs, r.dir, r.size = fs, dir, size
	u, err := fs.GetDiskUsage(dir)
	if err != nil {
		return nil // no usage to read (an in-memory FS): no reserve
	}
	r.tracked = true
	have := int64(0)
	if st, err := fs.Stat(r.Path()); err == nil {
		have = st.Size()
	}
	if have > 0 && u.AvailBytes < uint64(size) {
		if err := fs.Remove(r.Path()); err != nil && !errors.Is(err, iofs.ErrNotExist) {
			return NoSpace(fmt.Errorf("store: remove %s: %w", r.Path(), err))
		}
		log.Warn("store: disk nearly full: released the space reserve; new data is refused until GC frees room",
			"dir", dir, "free", u.AvailBytes, "reserve", have)
		have = 0
		if u, err = fs.GetDiskUsage(dir); err != nil {
			return fmt.Errorf("store: disk usage of %s: %w", dir, err)
		}
	}
	r.bytes.Store(have)
	r.held.Store(have == 0)
	if need := openNeed(fs, catalogDir); u.AvailBytes < need {
		return fmt.Errorf("%w: open %s: %d bytes free, the catalog needs about %d to open (its WAL and a new one): free space on this disk and retry: %w",
			ErrNoSpace, dir, u.AvailBytes, need, syscall.ENOSPC)
	}
	return nil
}

// openNeed is about what the catalog in dir writes to open: its WAL files
// flushed to a table, plus openSlack.
func openNeed(fs vfs.FS, dir string) uint64 {
	names, _ := fs.List(dir)
	need := uint64(openSlack)
	for _, n := range names {
		if strings.HasSuffix(n, ".log") {
			if st, err := fs.Stat(fs.PathJoin(dir, n)); err == nil {
				need += uint64(st.Size())
			}
		}
	}
	return need
}

// Restore re-creates RESERVE if it is missing and the disk has room for
// it twice over, ending the hold. Open (at its end) and GC call it; a
// failure leaves the hold on and is logged, never returned.
func (r *Reserve) Restore(log *slog.Logger) {
	if !r.tracked || r.bytes.Load() > 0 {
		return
	}
	u, err := r.fs.GetDiskUsage(r.dir)
	if err != nil || u.AvailBytes < 2*uint64(r.size) {
		return
	}
	if err := Write(r.fs, r.Path(), r.size); err != nil {
		_ = r.fs.Remove(r.Path())
		log.Warn("store: could not re-create the space reserve", "dir", r.dir, "err", err)
		return
	}
	r.bytes.Store(r.size)
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
