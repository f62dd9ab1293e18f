package space

// Sizes are the room a store keeps on its disk for its catalog, derived
// from the catalog's memtable size (Options.CatalogMemTableSize, m below).
// Pebble holds up to two memtables before it stalls writes
// (MemTableStopWritesThreshold), each backed by a WAL file, and keeps up
// to three old WAL files to recycle; flushing a memtable writes a table of
// at most its size. So:
//
//	Reserve  = 4m + 1 MiB   RESERVE's size: released, it lets the catalog
//	                        open after a full disk (flush every WAL it
//	                        finds, start a new one, write its MANIFEST),
//	                        and flush and compact while deletes and GC free
//	                        room
//	Headroom = 2m + 1 MiB   what new data leaves free: a Put (or a
//	                        compaction's copy) that would leave less is
//	                        refused, so the catalog can always flush the
//	                        memtables it holds and rotate its WAL
//	Floor    = 1 MiB        below this free, a Delete (its tombstone and
//	                        batch) first releases RESERVE, and is refused
//	                        if that is not enough: Pebble treats a failed
//	                        WAL write as fatal, and panics if it cannot
//	                        close a full WAL
//
// With the 4 MiB default memtable that is a 17 MiB reserve and 9 MiB of
// headroom; with a 1 MiB one, 5 and 3 MiB.
type Sizes struct {
	Reserve  int64
	Headroom uint64
	Floor    uint64
}

// slack is what the catalog needs besides its memtables and WAL files: a
// new WAL, a MANIFEST record, an OPTIONS file.
const slack = 1 << 20

// For returns the sizes for a catalog whose memtables are memTable bytes.
func For(memTable uint64) Sizes {
	return Sizes{Reserve: int64(4*memTable + slack), Headroom: 2*memTable + slack, Floor: slack}
}

// SealSize is the size at which a blob file is sealed on a disk of total
// bytes (0: unknown): limit (Options.BlobFileSize), or a sixteenth of the
// disk if that is smaller, but not below least. Rewriting a file needs
// room for its live bytes, so on a disk that holds few files of limit
// bytes, deleted data could not be reclaimed before the disk filled.
func SealSize(total, limit, least uint64) uint64 {
	if total == 0 {
		return limit
	}
	return max(min(limit, total/16), least)
}
