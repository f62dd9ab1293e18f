package store

import (
	"github.com/kvstore/kvstore/store/internal/space"
)

// Disk space. A store on a disk that reports its usage keeps room there
// for its catalog, sized from Options.CatalogMemTableSize (m), since Pebble
// retries a failed flush forever, stalls writes behind it, and cannot
// survive a WAL it cannot close (store/internal/space keeps it and says
// when):
//
//   - DIR/RESERVE, a preallocated file of 4m + 1 MiB (17 MiB by default),
//     as CockroachDB keeps its emergency ballast. A read-write Open that
//     finds less than that free removes it before the catalog opens, so
//     that the catalog opens (it flushes the WAL files it finds) and
//     Delete and GC can run; if the disk is still too full for the
//     catalog to open, Open fails at once with ErrNoSpace.
//   - A headroom of 2m + 1 MiB: a Put (any new data) that would leave less
//     free is refused with ErrNoSpace, so the catalog can always flush the
//     memtables it holds. RESERVE stays for the next Open.
//   - While RESERVE is missing, the store holds new data: Put and
//     PutSpanMemory fail with ErrNoSpace. A Delete's tombstone is written
//     while 1 MiB is free besides it; below that, if something else
//     filled the disk, the Delete releases RESERVE first (and holds new
//     data), and is refused only if that is not enough.
//   - GC and Compact rewrite a file only when the disk has room for its
//     live bytes besides the headroom, releasing RESERVE for that if it is
//     what stands in the way (a rewrite frees more than it takes); a file
//     there is no room for is skipped, with the reason.
//   - Open, GC and Compact re-create RESERVE once there is room for it
//     twice over, and the hold ends.
//   - A blob file is sealed at Options.BlobFileSize or a sixteenth of the
//     disk, whichever is smaller, so that rewriting one (which needs room
//     for its live bytes) fits in the room deletes free on a small disk.
//
// Stats.ReserveBytes says what RESERVE holds now and Stats.SpaceHeld
// whether new data is held. Every error caused by a full disk (ENOSPC from
// a blob write or sync, the catalog, FORMAT, compaction, and the refusals
// above) wraps both ErrNoSpace and syscall.ENOSPC.

// reserveFileName is the reserve's name in the store's directory.
const reserveFileName = space.FileName

// spaceState is the reserve's state. Writers change it holding writeMu.
type spaceState = space.Reserve

// releaseReserve runs before the catalog opens on a read-write Open
// (space.Reserve.Release); it has the blob writer ask the reserve for room
// (room) and seals blob files at a sixteenth of the disk at most.
func (db *DB) releaseReserve() error {
	err := db.space.Release(db.fs, db.dir, space.For(db.opts.CatalogMemTableSize), db.fs.PathJoin(db.dir, catalogDirName), db.log)
	db.w.Room = db.room
	db.w.Limit = space.SealSize(db.space.Total(), uint64(db.opts.BlobFileSize), MinBlobFileSize)
	return err
}

// room is the blob writer's check before an extent of n bytes (writer
// lock held): new data needs the headroom and no hold
// (space.Reserve.Room), records that free space (frees) only room for the
// catalog to commit (space.Reserve.CatalogRoom).
func (db *DB) room(n uint64, frees bool) error {
	if frees {
		return db.space.CatalogRoom(n)
	}
	return db.space.Room(n)
}

// restoreReserve re-creates RESERVE if it is missing and there is room,
// ending the hold (space.Reserve.Restore). Open (at its end) and GC call
// it; a failure is logged, never returned.
func (db *DB) restoreReserve() { db.space.Restore() }

// noSpace wraps in ErrNoSpace an error a full disk caused (space.NoSpace).
func noSpace(err error) error { return space.NoSpace(err) }
