package store

import (
	"sync/atomic"
	"time"

	"github.com/kvstore/kvstore/store/internal/maint"
	"github.com/kvstore/kvstore/store/internal/opstats"
)

// OpsStats are the Stats of the operations side. Fsync latencies are
// also kept as histograms over SyncBuckets.
type OpsStats = opstats.Stats

// Latency is a snapshot of one latency histogram.
type Latency = opstats.Latency

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
		CompactionDebt: maint.Debt(db.BlobFiles(), db.opts.CompactLiveRatio),
		Compactions:    c.compactions.Load(), CompactedBytes: c.compactedBytes.Load(), ReclaimedBytes: c.reclaimedBytes.Load(),
		GCRuns: c.gcRuns.Load(), Evictions: c.evictions.Load(), EvictedBytes: c.evictedBytes.Load(),
		EventsDropped: c.eventsDropped.Load(), PinnedPackets: db.pinnedCount(), CapacityMaxBytes: db.opts.MaxBytes,
		GetLatency: c.getLatency.Snapshot(), PutLatency: c.putLatency.Snapshot(),
		AssembleLatency: c.assembleLatency.Snapshot(), SpanReadLatency: c.spanReadLatency.Snapshot(),
		Assembles: c.assembles.Load(), AssembledPackets: c.assembledPackets.Load(),
	}
}
