package store

import (
	"errors"
	"fmt"
	iofs "io/fs"
	"strings"
	"sync/atomic"
	"syscall"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// Disk space. A store on a disk that reports its usage (vfs.FS's
// GetDiskUsage: the OS's file systems, not the in-memory one) keeps
// DIR/RESERVE, a preallocated file of 2 x CatalogMemTableSize bytes (8 MiB
// by default), as CockroachDB keeps its emergency ballast:
//
//   - A read-write Open that finds less than that free removes RESERVE
//     before the catalog opens. Pebble must flush the last WAL's memtable
//     and start a new WAL to open, and it retries a failed flush forever,
//     so without room Open would hang; with RESERVE's bytes back it opens,
//     and Delete and GC can run and free space. If the disk is still too
//     full for the catalog to open (less free than its WAL files plus 1
//     MiB), Open fails at once with ErrNoSpace.
//   - While RESERVE is missing, the store holds new data: Put,
//     PutSpanMemory and Compact fail with ErrNoSpace, and GC removes dead
//     files but does not rewrite tails, so the freed room goes to deletes.
//   - Open and every GC re-create RESERVE once there is room for it twice
//     over, and the hold ends.
//
// Stats.ReserveBytes says what RESERVE holds now and Stats.SpaceHeld
// whether new data is held. Every error caused by a full disk (ENOSPC from
// a blob write or sync, the catalog, FORMAT, compaction, and the refusals
// above) wraps both ErrNoSpace and syscall.ENOSPC.

// reserveFileName is the reserve's name in the store's directory.
const reserveFileName = "RESERVE"

// openSlack is what the catalog needs to open besides room to flush its
// WAL files: a new WAL, a manifest record, an OPTIONS file.
const openSlack = 1 << 20

// spaceState is the reserve's state. Writers change it holding writeMu.
type spaceState struct {
	tracked bool         // the FS reports disk usage: the reserve is kept
	reserve atomic.Int64 // bytes RESERVE holds now
	held    atomic.Bool  // RESERVE is missing: new data is refused
}

func (db *DB) reservePath() string { return db.fs.PathJoin(db.dir, reserveFileName) }

func (db *DB) reserveSize() int64 { return 2 * int64(db.opts.CatalogMemTableSize) }

// releaseReserve runs before the catalog opens on a read-write Open: on a
// nearly full disk it removes RESERVE, then refuses to go on (ErrNoSpace)
// if the catalog still has no room to open, rather than let Pebble retry
// its flush forever.
func (db *DB) releaseReserve() error {
	u, err := db.fs.GetDiskUsage(db.dir)
	if err != nil {
		return nil // no usage to read (an in-memory FS): no reserve
	}
	db.space.tracked = true
	size := int64(0)
	if st, err := db.fs.Stat(db.reservePath()); err == nil {
		size = st.Size()
	}
	if size > 0 && u.AvailBytes < uint64(db.reserveSize()) {
		if err := db.fs.Remove(db.reservePath()); err != nil && !errors.Is(err, iofs.ErrNotExist) {
			return noSpace(fmt.Errorf("store: remove %s: %w", db.reservePath(), err))
		}
		db.log.Warn("store: disk nearly full: released the space reserve; new data is refused until GC frees room",
			"dir", db.dir, "free", u.AvailBytes, "reserve", size)
		size = 0
		if u, err = db.fs.GetDiskUsage(db.dir); err != nil {
			return fmt.Errorf("store: disk usage of %s: %w", db.dir, err)
		}
	}
	db.space.reserve.Store(size)
	db.hold(size == 0)
	if need := db.openNeed(); u.AvailBytes < need {
		return fmt.Errorf("%w: open %s: %d bytes free, the catalog needs about %d to open (its WAL and a new one): free space on this disk and retry: %w",
			ErrNoSpace, db.dir, u.AvailBytes, need, syscall.ENOSPC)
	}
	return nil
}

// openNeed is about what the catalog writes to open: its WAL files
// flushed to a table, plus openSlack.
func (db *DB) openNeed() uint64 {
	dir := db.fs.PathJoin(db.dir, catalogDirName)
	names, _ := db.fs.List(dir)
	need := uint64(openSlack)
	for _, n := range names {
		if strings.HasSuffix(n, ".log") {
			if st, err := db.fs.Stat(db.fs.PathJoin(dir, n)); err == nil {
				need += uint64(st.Size())
			}
		}
	}
	return need
}

// restoreReserve re-creates RESERVE if it is missing and the disk has room
// for it twice over, ending the hold. Open (at its end) and GC call it; a
// failure leaves the hold on and is logged, never returned.
func (db *DB) restoreReserve() {
	if !db.space.tracked || db.space.reserve.Load() > 0 {
		return
	}
	u, err := db.fs.GetDiskUsage(db.dir)
	size := db.reserveSize()
	if err != nil || u.AvailBytes < 2*uint64(size) {
		return
	}
	if err := writeReserve(db.fs, db.reservePath(), size); err != nil {
		_ = db.fs.Remove(db.reservePath())
		db.log.Warn("store: could not re-create the space reserve", "dir", db.dir, "err", err)
		return
	}
	db.space.reserve.Store(size)
	db.hold(false)
}

// writeReserve creates a file of size bytes whose blocks are allocated:
// preallocated where the FS can, else written as zeros. It is not synced:
// a reserve lost in a crash is re-created by the next Open.
func writeReserve(fs vfs.FS, path string, size int64) error {
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

// hold turns the refusal of new data on or off.
func (db *DB) hold(on bool) {
	db.space.held.Store(on)
	if on {
		db.w.Hold = fmt.Errorf("%w: disk nearly full: the store's space reserve (%s) is released, so new data is refused; delete data and run GC to free room: %w",
			ErrNoSpace, db.reservePath(), syscall.ENOSPC)
	} else {
		db.w.Hold = nil
	}
}

// noSpace wraps in ErrNoSpace an error a full disk caused: one wrapping
// ENOSPC, or one whose text names it. Pebble flattens some errors into
// text (a failed WAL write reaches us as a fatal message, a failed
// MANIFEST write at open as a formatted error), so for those the text is
// the only trace; they get syscall.ENOSPC wrapped back in.
func noSpace(err error) error {
	switch {
	case err == nil || errors.Is(err, ErrNoSpace):
		return err
	case errors.Is(err, syscall.ENOSPC):
		return fmt.Errorf("%w: %w", ErrNoSpace, err)
	case isDiskFull(err):
		return fmt.Errorf("%w: %w (%w)", ErrNoSpace, err, syscall.ENOSPC)
	case strings.Contains(err.Error(), syscall.ENOSPC.Error()):
		return fmt.Errorf("%w: %w (%w)", ErrNoSpace, err, syscall.ENOSPC)
	}
	return err
}
