// Package recovery brings a catalog up to date with the blob log, or
// rebuilds one from it: the put records and tombstones that lead extents
// (docs/format.md, "Rebuilding the catalog") are found past each blob
// file's catalogued size, or in every file from its header for a rebuild,
// and applied in sequence order over the catalog's packets.
//
// Reconcile plans and writes nothing: it loads the blob file records and
// the two sequences (load), reads the whole extents of each file's tail
// (scan, through bloblog.Scan) and decodes the record leading each one
// (classify), repoints catalogued packets whose file is gone to a copy
// compaction made (repoint), plays the records over the catalog's entries
// (apply) and extends each file's record over the extents it took in
// (account). Plan.Commit then writes the result in one synced batch
// (batch): packet headers and index entries, model specs, the blob file
// records that changed, the next-blob and next-record sequences.
//
// It gets what it reads through Store: the catalog, the file system, the
// blobs/ directory and the blob files on disk (maint.DiskFiles). It never
// sees the store's DB and takes no lock; store.DB's Open (db.reconcile)
// and store.Recover admit it, decide whether to commit, and install what
// it returns (store.ReconcileReport = recovery.Report).
//
// Files reads, once the catalog is reconciled, the blob file records and
// the next file number that Open registers.
//
// The bytes it reads are format's: the blob header
// (format.DecodeBlobHeader), the extent trailer (format.Trailer, through
// bloblog.Scan), the put record (format/put_record.go) and the tombstone
// (format/tombstone.go); the ones it writes are the catalog's (packet
// header, model spec, blob file record and sequences, coded in format and
// store/internal/catalog). docs/format.md draws each one.
package recovery
