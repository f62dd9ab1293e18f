// Package space keeps a store's disk space reserve and says which errors
// a full disk caused.
//
// A store on a disk that reports its usage (vfs.FS's GetDiskUsage: the
// OS's file systems, not the in-memory one) keeps DIR/RESERVE, a
// preallocated file of 2 x CatalogMemTableSize bytes (8 MiB by default),
// as CockroachDB keeps its emergency ballast. It has no content: its
// blocks are allocated (preallocated where the FS can, else written as
// zeros) and it is never synced:
//
//	DIR/RESERVE   size bytes, no content
//
// What it is for:
//
//   - A read-write Open that finds less than that free removes RESERVE
//     before the catalog opens (Reserve.Release). Pebble must flush the
//     last WAL's memtable and start a new WAL to open, and it retries a
//     failed flush forever, so without room Open would hang; with
//     RESERVE's bytes back it opens, and Delete and GC can run and free
//     space. If the disk is still too full for the catalog to open (less
//     free than its WAL files plus 1 MiB), Release fails at once with
//     ErrNoSpace.
//   - While RESERVE is missing, the store holds new data: Reserve.Hold is
//     the error (wrapping ErrNoSpace) that refuses it.
//   - Open and every GC re-create RESERVE (Reserve.Restore) once there is
//     room for it twice over, and the hold ends.
//
// NoSpace makes every error a full disk caused wrap both ErrNoSpace and
// syscall.ENOSPC, including those Pebble flattens into text and Windows'
// own disk-full errors.
//
// The package takes the file system, the store's directory and the
// catalog's directory as arguments; it logs only to the logger it is
// given, and knows nothing of the store's DB.
package space
