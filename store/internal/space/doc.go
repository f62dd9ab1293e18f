// Package space keeps the room a store needs on its disk for its catalog,
// and says which errors a full disk caused.
//
// Pebble, the catalog, retries a failed flush forever and stalls writes
// behind it (so a commit, Close's included, would wait for ever), and
// panics if it cannot close a full WAL. So a store on a disk that reports
// its usage (vfs.FS's GetDiskUsage: the OS's file systems, not the
// in-memory one) keeps room for it, sized from the catalog's memtable
// size (Sizes, sizes.go):
//
//   - DIR/RESERVE, a preallocated file of Sizes.Reserve bytes, as
//     CockroachDB keeps its emergency ballast. It has no content: its
//     blocks are allocated (preallocated where the FS can, else written
//     as zeros) and it is never synced:
//
//     DIR/RESERVE   size bytes, no content
//
//   - Sizes.Headroom: new data that would leave less free is refused
//     (Reserve.Room), so the catalog can always flush what it holds.
//
// What the reserve is for:
//
//   - A read-write Open that finds less than its size free removes
//     RESERVE before the catalog opens (Reserve.Release): Pebble must
//     flush the WAL files it finds and start a new WAL to open, so
//     without room Open would hang; with RESERVE's bytes back it opens,
//     and Delete and GC can run and free space. If the disk is still too
//     full for the catalog to open (less free than its WAL files plus
//     1 MiB), Release fails at once with ErrNoSpace.
//   - A Delete on a disk something else filled releases it for its
//     tombstone and batch (Reserve.CatalogRoom), and a compaction whose
//     copy only the reserve stands in the way of takes its room
//     (Reserve.CopyRoom).
//   - While RESERVE is missing, the store holds new data: Reserve.Hold is
//     the error (wrapping ErrNoSpace) that refuses it.
//   - Open, GC and Compact re-create RESERVE (Reserve.Restore) once there
//     is room for it twice over, and the hold ends.
//
// CatalogBusy reads Pebble's metrics to say whether a commit could wait on
// a write stall, so that a write that may be dropped (access statistics)
// is not made to wait for ever. SealSize caps blob files at a sixteenth of
// the disk, so that rewriting one fits in the room deletes free.
//
// NoSpace makes every error a full disk caused wrap both ErrNoSpace and
// syscall.ENOSPC, including those Pebble flattens into text and Windows'
// own disk-full errors.
//
// The package takes the file system, the store's directory and the
// catalog's directory as arguments; it logs only to the logger it is
// given, and knows nothing of the store's DB.
package space
