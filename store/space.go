package store

import "github.com/kvstore/kvstore/store/internal/space"

// Disk space. A store on a disk that reports its usage keeps DIR/RESERVE,
// a preallocated file of 2 x CatalogMemTableSize bytes (8 MiB by
// default), as CockroachDB keeps its emergency ballast
// (store/internal/space keeps it and says when):
//
//   - A read-write Open that finds less than that free removes RESERVE
//     before the catalog opens, so that it opens and Delete and GC can run
//     and free space; if the disk is still too full for the catalog to
//     open, Open fails at once with ErrNoSpace.
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
const reserveFileName = space.FileName

// spaceState is the reserve's state. Writers change it holding writeMu.
type spaceState = space.Reserve

// releaseReserve runs before the catalog opens on a read-write Open
// (space.Reserve.Release), and holds new data if the reserve is gone.
func (db *DB) releaseReserve() error {
	err := db.space.Release(db.fs, db.dir, 2*int64(db.opts.CatalogMemTableSize), db.fs.PathJoin(db.dir, catalogDirName), db.log)
	db.w.Hold = db.space.Hold()
	return err
}

// restoreReserve re-creates RESERVE if it is missing and there is room,
// ending the hold (space.Reserve.Restore). Open (at its end) and GC call
// it; a failure is logged, never returned.
func (db *DB) restoreReserve() {
	db.space.Restore(db.log)
	db.w.Hold = db.space.Hold()
}

// noSpace wraps in ErrNoSpace an error a full disk caused (space.NoSpace).
func noSpace(err error) error { return space.NoSpace(err) }
