package opstats

import "time"

// Stats are the store's Stats of the operations side (store.OpsStats).
// Fsync latencies are also kept as histograms over SyncBuckets.
type Stats struct {
	BlobSyncMax      time.Duration
	CatalogSyncMax   time.Duration
	BlobSyncHist     []uint64 // per SyncBuckets bound (not cumulative); last: above every bound
	CatalogSyncHist  []uint64
	CompactionDebt   uint64 // dead bytes of non-active files below Options.CompactLiveRatio
	Compactions      uint64 // Compact runs that rewrote at least one file
	CompactedBytes   uint64 // bytes copied by compaction
	ReclaimedBytes   uint64 // bytes of blob files removed by compaction and GC
	GCRuns           uint64
	Evictions        uint64 // packets evicted for Options.MaxBytes
	EvictedBytes     uint64
	EventsDropped    uint64 // events a full subscriber channel missed, over all subscribers
	PinnedPackets    int    // packets pinned now
	CapacityMaxBytes int64  // Options.MaxBytes (0: no cap)

	// Latencies of the public calls, over LatencyBuckets: Get (hit or
	// miss; Assemble's own Get per item included, as in Gets), Put, Assemble (PrepareAssemble and Run called apart are not
	// timed) and span memory block reads (SpanReader's ReadFactors,
	// FactorBytes, Resident and what calls them), errors included.
	GetLatency, PutLatency, AssembleLatency, SpanReadLatency Latency
	Assembles                                                uint64 // Assemble calls
	AssembledPackets                                         uint64 // items those calls were given
}
