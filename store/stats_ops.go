package store

import (
	"sync/atomic"
	"time"

	"github.com/kvstore/kvstore/store/internal/maint"
	"github.com/kvstore/kvstore/store/internal/opstats"
)

// OpsStats are the Stats of the operations side. Fsync latencies are
// also kept as histograms over SyncBuckets.
type OpsStats struct {
	// BlobSyncMax and CatalogSyncMax are the longest fdatasync of a blob
	// file and the longest catalog WAL sync.
	BlobSyncMax    time.Duration
	CatalogSyncMax time.Duration
	// BlobSyncHist and CatalogSyncHist count those syncs per SyncBuckets
	// bound (not cumulative); the last entry counts those above every
	// bound.
	BlobSyncHist    []uint64
	CatalogSyncHist []uint64
	// CompactionDebt is the dead bytes of non-active files below
	// Options.CompactLiveRatio.
	CompactionDebt uint64
	// Compactions counts the Compact runs that rewrote at least one file.
	Compactions uint64
	// CompactedBytes is the bytes copied by compaction.
	CompactedBytes uint64
	// ReclaimedBytes is the bytes of blob files removed by compaction and
	// GC.
	ReclaimedBytes uint64
	// GCRuns counts the GC runs.
	GCRuns uint64
	// Evictions counts the packets evicted for Options.MaxBytes, and
	// EvictedBytes their extents' bytes.
	Evictions    uint64
	EvictedBytes uint64
	// EventsDropped counts the events a full subscriber channel missed,
	// over all subscribers.
	EventsDropped uint64
	// PinnedPackets is the packets pinned now.
	PinnedPackets int
	// CapacityMaxBytes is Options.MaxBytes (0: no cap).
	CapacityMaxBytes int64

	// Latencies of the public calls, over LatencyBuckets: Get (hit or
	// miss; Assemble's own Get per item included, as in Gets), Put,
	// Assemble (PrepareAssemble and Run called apart are not timed) and
	// span memory block reads (SpanReader's ReadFactors, FactorBytes,
	// Resident and what calls them), errors included.
	GetLatency, PutLatency, AssembleLatency, SpanReadLatency Latency
	// Assembles counts the Assemble calls, AssembledPackets the items
	// those calls were given.
	Assembles        uint64
	AssembledPackets uint64
}

// Latency is a snapshot of one latency histogram.
type Latency struct {
	// Count is the calls observed, Sum their total time.
	Count uint64
	Sum   time.Duration
	// Buckets counts the calls per LatencyBuckets bound (not cumulative);
	// the last entry counts those above every bound.
	Buckets []uint64
}

// fromLatency is opstats' snapshot as the store's (the same fields).
func fromLatency(l opstats.Latency) Latency { return Latency(l) }

// LatencyBuckets are the upper bounds of the operation latency histograms.
var LatencyBuckets = opstats.LatencyBuckets

// SyncBuckets are the upper bounds of the fsync latency histograms.
var SyncBuckets = opstats.SyncBuckets

// latency is one operation's latency histogram, updated without locks.
type latency struct{ opstats.Hist }

// timer starts timing one call; calling what it returns observes it:
// "defer db.st.getLatency.timer()()".
func (l *latency) timer() func() { return l.Timer() }

// assembleTimer counts one Assemble call of n items and times it:
// "defer db.st.assembleTimer(len(items))()".
func (c *opsCounters) assembleTimer(n int) func() {
	c.assembles.Add(1)
	c.assembledPackets.Add(uint64(n))
	return c.assembleLatency.timer()
}

// syncCounter counts calls of one kind of sync, their maximum latency and
// their latency histogram, without locks.
type syncCounter struct{ opstats.Sync }

func (c *syncCounter) observe(d time.Duration) { c.Observe(d) }

// opsCounters are the operations side's activity counters.
type opsCounters struct {
	compactions, compactedBytes, reclaimedBytes atomic.Uint64
	gcRuns, evictions, evictedBytes             atomic.Uint64
	eventsDropped                               atomic.Uint64
	assembles, assembledPackets                 atomic.Uint64
	getLatency, putLatency                      latency
	assembleLatency, spanReadLatency            latency
}

// opsStats fills s's OpsStats.
func (db *DB) opsStats(s *Stats) {
	c := &db.st
	s.OpsStats = OpsStats{
		BlobSyncMax: c.blobSyncs.Max(), CatalogSyncMax: c.catalogSyncs.Max(),
		BlobSyncHist: c.blobSyncs.Histogram(), CatalogSyncHist: c.catalogSyncs.Histogram(),
		CompactionDebt: maint.Debt(db.blobRecords(), db.opts.CompactLiveRatio),
		Compactions:    c.compactions.Load(), CompactedBytes: c.compactedBytes.Load(), ReclaimedBytes: c.reclaimedBytes.Load(),
		GCRuns: c.gcRuns.Load(), Evictions: c.evictions.Load(), EvictedBytes: c.evictedBytes.Load(),
		EventsDropped: c.eventsDropped.Load(), PinnedPackets: db.pinnedCount(), CapacityMaxBytes: db.opts.MaxBytes,
		GetLatency: fromLatency(c.getLatency.Snapshot()), PutLatency: fromLatency(c.putLatency.Snapshot()),
		AssembleLatency: fromLatency(c.assembleLatency.Snapshot()), SpanReadLatency: fromLatency(c.spanReadLatency.Snapshot()),
		Assembles: c.assembles.Load(), AssembledPackets: c.assembledPackets.Load(),
	}
}
