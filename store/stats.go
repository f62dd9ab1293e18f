package store

import (
	"sync/atomic"
	"time"
)

// Stats is a snapshot of a DB's contents and activity since Open.
type Stats struct {
	Packets      uint64 // live packets
	SpanMemories uint64 // stored span memories (contexts)
	LiveBytes    uint64 // bytes of their extents, packets' and span memories'
	DeadBytes    uint64 // bytes of deleted or replaced extents, not yet reclaimed
	BlobFiles    []BlobFileInfo

	Puts         uint64 // packets written
	PutsDeduped  uint64 // Puts of a packet already stored: nothing written
	Deletes      uint64
	Gets         uint64
	Hits         uint64 // Gets that returned a view
	Misses       uint64 // Gets of an absent packet (or another model's)
	ReserveBytes uint64 // bytes DIR/RESERVE holds for a full disk (space.go); 0 when released or untracked
	SpaceHeld    bool   // the reserve is released: Put, PutSpanMemory and Compact fail with ErrNoSpace
	BytesWritten uint64 // extent bytes written to blob files
	BytesRead    uint64 // chunk bytes returned through views (first time per view)
	BytesChecked uint64 // chunk bytes whose CRC32C was computed on read
	Corruptions  uint64 // chunks that failed their CRC32C on read
	OpenViews    int64  // views not yet released

	BlobSyncs       uint64        // fdatasyncs of blob files
	BlobSyncTime    time.Duration // total time in them
	CatalogSyncs    uint64        // catalog WAL syncs: synced commits, and background syncs (catalog.Syncer)
	CatalogSyncTime time.Duration
	// CatalogUnsynced counts the catalog commits that did not wait for a
	// sync, Put's and Delete's: the blob log's synced records hold them.
	CatalogUnsynced uint64

	OpsStats // compaction, GC, eviction, events, sync latency (stats_ops.go)

	// Reconciled is what Open found in the blob log that the catalog did
	// not hold, and did about it (reconcile.go).
	Reconciled ReconcileReport
	// ReconciledInMemory: a read-only Open applied Reconciled to the catalog
	// in memory only (the disk is not written); the next read-write Open
	// applies it on disk.
	ReconciledInMemory bool
}

// counters are the DB's activity counters, updated without locks.
type counters struct {
	puts, putsDeduped, deletes atomic.Uint64
	gets, hits, misses         atomic.Uint64
	bytesWritten, bytesRead    atomic.Uint64
	verifiedBytes, corruptions atomic.Uint64
	views                      atomic.Int64
	spanMemories               atomic.Int64 // catalogued; changed under filesMu (span_list.go)
	blobSyncs                  syncCounter
	blobSyncNanos              atomic.Uint64
	catalogSyncs               syncCounter
	catalogSyncNanos           atomic.Uint64
	catalogUnsynced            atomic.Uint64
	opsCounters                // stats_ops.go
}

// timed runs fn and adds its duration and one call to the counters.
func timed(n *syncCounter, nanos *atomic.Uint64, fn func() error) error {
	start := time.Now()
	err := fn()
	d := time.Since(start)
	nanos.Add(uint64(d))
	n.observe(d)
	return err
}

// Stats returns a snapshot. It works on a closed DB too (counters as they
// were at Close).
func (db *DB) Stats() Stats {
	c := &db.st
	s := Stats{
		Puts: c.puts.Load(), PutsDeduped: c.putsDeduped.Load(), Deletes: c.deletes.Load(),
		Gets: c.gets.Load(), Hits: c.hits.Load(), Misses: c.misses.Load(),
		BytesWritten: c.bytesWritten.Load(), BytesRead: c.bytesRead.Load(),
		BytesChecked: c.verifiedBytes.Load(), Corruptions: c.corruptions.Load(),
		OpenViews: c.views.Load(),
		BlobSyncs: c.blobSyncs.Load(), BlobSyncTime: time.Duration(c.blobSyncNanos.Load()),
		CatalogSyncs: c.catalogSyncs.Load(), CatalogSyncTime: time.Duration(c.catalogSyncNanos.Load()),
		CatalogUnsynced: c.catalogUnsynced.Load(),
	}
	s.ReserveBytes, s.SpaceHeld = uint64(db.space.Bytes()), db.space.Held()
	db.opsStats(&s)
	s.Reconciled, s.ReconciledInMemory = db.reconciled, db.inMemoryCatalog
	recs, spans := db.blobFiles()
	s.BlobFiles, s.SpanMemories = mapSlice(recs, fromBlobRecord), spans
	var extents uint64
	for _, f := range s.BlobFiles {
		extents += uint64(f.LiveExtents)
		s.LiveBytes += f.LiveBytes
		s.DeadBytes += f.DeadBytes
	}
	// Every live extent is a packet's or a span memory's.
	s.Packets = extents - min(s.SpanMemories, extents)
	return s
}
