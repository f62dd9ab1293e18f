package store

import (
	"sync/atomic"
	"time"
)

// OpsStats are the Stats of the operations side. Fsync latencies are
// also kept as histograms over SyncBuckets.
type OpsStats struct {
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

// Latency is a snapshot of one latency histogram.
type Latency struct {
	Count   uint64
	Sum     time.Duration
	Buckets []uint64 // per LatencyBuckets bound (not cumulative); last: above every bound
}

// LatencyBuckets are the upper bounds of the operation latency histograms.
var LatencyBuckets = []time.Duration{
	10 * time.Microsecond, 25 * time.Microsecond, 50 * time.Microsecond, 100 * time.Microsecond,
	250 * time.Microsecond, 500 * time.Microsecond, time.Millisecond, 2500 * time.Microsecond,
	5 * time.Millisecond, 10 * time.Millisecond, 25 * time.Millisecond, 50 * time.Millisecond,
	100 * time.Millisecond, 250 * time.Millisecond, 500 * time.Millisecond, time.Second,
	2500 * time.Millisecond, 10 * time.Second,
}

// latency is one operation's latency histogram, updated without locks.
type latency struct {
	nanos atomic.Uint64
	hist  [19]atomic.Uint64 // len(LatencyBuckets)+1
}

// observe adds one call of duration d.
func (l *latency) observe(d time.Duration) {
	l.nanos.Add(uint64(max(d, 0)))
	i := 0
	for i < len(LatencyBuckets) && d > LatencyBuckets[i] {
		i++
	}
	l.hist[i].Add(1)
}

// timer starts timing one call; calling what it returns observes it:
// "defer db.st.getLatency.timer()()".
func (l *latency) timer() func() {
	start := time.Now()
	return func() { l.observe(time.Since(start)) }
}

func (l *latency) snapshot() Latency {
	s := Latency{Sum: time.Duration(l.nanos.Load()), Buckets: make([]uint64, len(l.hist))}
	for i := range l.hist {
		s.Buckets[i] = l.hist[i].Load()
		s.Count += s.Buckets[i]
	}
	return s
}

// assembleTimer counts one Assemble call of n items and times it:
// "defer db.st.assembleTimer(len(items))()".
func (c *opsCounters) assembleTimer(n int) func() {
	c.assembles.Add(1)
	c.assembledPackets.Add(uint64(n))
	return c.assembleLatency.timer()
}

// SyncBuckets are the upper bounds of the fsync latency histograms.
var SyncBuckets = []time.Duration{
	100 * time.Microsecond, 250 * time.Microsecond, 500 * time.Microsecond,
	time.Millisecond, 2500 * time.Microsecond, 5 * time.Millisecond, 10 * time.Millisecond,
	25 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond, 250 * time.Millisecond, time.Second,
}

// syncCounter counts calls of one kind of sync, their maximum latency and
// their latency histogram, without locks.
type syncCounter struct {
	atomic.Uint64 // calls
	maxNanos      atomic.Uint64
	hist          [13]atomic.Uint64 // len(SyncBuckets)+1
}

func (c *syncCounter) observe(d time.Duration) {
	c.Add(1)
	for {
		m := c.maxNanos.Load()
		if uint64(d) <= m || c.maxNanos.CompareAndSwap(m, uint64(d)) {
			break
		}
	}
	i := 0
	for i < len(SyncBuckets) && d > SyncBuckets[i] {
		i++
	}
	c.hist[i].Add(1)
}

func (c *syncCounter) histogram() []uint64 {
	h := make([]uint64, len(c.hist))
	for i := range h {
		h[i] = c.hist[i].Load()
	}
	return h
}

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
		BlobSyncMax: time.Duration(c.blobSyncs.maxNanos.Load()), CatalogSyncMax: time.Duration(c.catalogSyncs.maxNanos.Load()),
		BlobSyncHist: c.blobSyncs.histogram(), CatalogSyncHist: c.catalogSyncs.histogram(),
		CompactionDebt: db.compactionDebt(),
		Compactions:    c.compactions.Load(), CompactedBytes: c.compactedBytes.Load(), ReclaimedBytes: c.reclaimedBytes.Load(),
		GCRuns: c.gcRuns.Load(), Evictions: c.evictions.Load(), EvictedBytes: c.evictedBytes.Load(),
		EventsDropped: c.eventsDropped.Load(), PinnedPackets: db.pinnedCount(), CapacityMaxBytes: db.opts.MaxBytes,
		GetLatency: c.getLatency.snapshot(), PutLatency: c.putLatency.snapshot(),
		AssembleLatency: c.assembleLatency.snapshot(), SpanReadLatency: c.spanReadLatency.snapshot(),
		Assembles: c.assembles.Load(), AssembledPackets: c.assembledPackets.Load(),
	}
}

// compactionDebt is the dead bytes of the files Compact would rewrite at
// the store's CompactLiveRatio. The active file is taken to be the highest
// numbered unsealed one (Stats does not wait for the writer lock).
func (db *DB) compactionDebt() uint64 {
	files := db.BlobFiles()
	active := uint32(0)
	for _, r := range files {
		if !r.Sealed {
			active = r.Num
		}
	}
	var debt uint64
	for _, r := range files {
		used := r.LiveBytes + r.DeadBytes
		if r.Num != active && r.DeadBytes > 0 && float64(r.LiveBytes) < db.opts.CompactLiveRatio*float64(used) {
			debt += r.DeadBytes
		}
	}
	return debt
}
