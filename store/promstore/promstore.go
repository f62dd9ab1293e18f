// Package promstore exposes a kvstore store's Stats as Prometheus metrics.
// It is its own package so that the engine does not depend on
// client_golang:
//
//	reg.MustRegister(promstore.New(db, nil))
//
// Every scrape takes one db.Stats() snapshot. Counters are the store's
// activity since Open; gauges its contents now; fsync latencies are
// histograms over store.SyncBuckets, and the latencies of Get, Put,
// Assemble and span memory block reads histograms over
// store.LatencyBuckets.
//
// Names follow one scheme, checked by promlint in the tests:
// kvstore_<noun>_<unit>_total for counters of a unit (written_bytes_total),
// kvstore_<noun>_total for counters of events (puts_total),
// kvstore_<noun>_<unit> for gauges (live_bytes, packets) and
// kvstore_<operation>_duration_seconds for latency histograms. The table
// of every metric, and the renames from the earlier names, are in
// docs/metrics.md.
package promstore

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kvstore/kvstore/store"
)

// Source is what the collector reads: *store.DB implements it.
type Source interface {
	Stats() store.Stats
}

// metric is one scalar metric read from a snapshot.
type metric struct {
	desc  *prometheus.Desc
	kind  prometheus.ValueType
	value func(*store.Stats) float64
}

// Collector is a prometheus.Collector of one store's Stats.
type Collector struct {
	src       Source
	scalars   []metric
	latencies []latencyMetric
}

// latencyMetric is one histogram read from a snapshot.
type latencyMetric struct {
	desc    *prometheus.Desc
	buckets []float64 // upper bounds, seconds
	value   func(*store.Stats) store.Latency
}

// New returns a collector of src's Stats, with metric names starting
// "kvstore_" and the given constant labels (nil for none), e.g. the store's
// directory when a process has several.
func New(src Source, labels prometheus.Labels) *Collector {
	d := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc("kvstore_"+name, help, nil, labels)
	}
	c := &Collector{src: src}
	histogram := func(name, help string, bounds []time.Duration, f func(*store.Stats) store.Latency) {
		b := make([]float64, len(bounds))
		for i, d := range bounds {
			b[i] = d.Seconds()
		}
		c.latencies = append(c.latencies, latencyMetric{d(name, help), b, f})
	}
	histogram("blob_sync_duration_seconds", "Latency of fdatasyncs of blob files.", store.SyncBuckets, func(s *store.Stats) store.Latency {
		return store.Latency{Count: s.BlobSyncs, Sum: s.BlobSyncTime, Buckets: s.BlobSyncHist}
	})
	histogram("catalog_sync_duration_seconds", "Latency of catalog WAL syncs: synced commits and the background syncs behind Put and Delete.", store.SyncBuckets, func(s *store.Stats) store.Latency {
		return store.Latency{Count: s.CatalogSyncs, Sum: s.CatalogSyncTime, Buckets: s.CatalogSyncHist}
	})
	histogram("get_duration_seconds", "Latency of Get, hits and misses (Assemble's per item included).", store.LatencyBuckets,
		func(s *store.Stats) store.Latency { return s.GetLatency })
	histogram("put_duration_seconds", "Latency of Put.", store.LatencyBuckets, func(s *store.Stats) store.Latency { return s.PutLatency })
	histogram("assemble_duration_seconds", "Latency of Assemble.", store.LatencyBuckets,
		func(s *store.Stats) store.Latency { return s.AssembleLatency })
	histogram("span_read_duration_seconds", "Latency of span memory block reads (factors, resident rows), verification included.",
		store.LatencyBuckets, func(s *store.Stats) store.Latency { return s.SpanReadLatency })
	counter := func(name, help string, f func(*store.Stats) float64) {
		c.scalars = append(c.scalars, metric{d(name, help), prometheus.CounterValue, f})
	}
	gauge := func(name, help string, f func(*store.Stats) float64) {
		c.scalars = append(c.scalars, metric{d(name, help), prometheus.GaugeValue, f})
	}
	u := func(f func(*store.Stats) uint64) func(*store.Stats) float64 {
		return func(s *store.Stats) float64 { return float64(f(s)) }
	}
	counter("puts_total", "Packets written.", u(func(s *store.Stats) uint64 { return s.Puts }))
	counter("deduped_puts_total", "Puts of a packet already stored.", u(func(s *store.Stats) uint64 { return s.PutsDeduped }))
	counter("deletes_total", "Packets deleted.", u(func(s *store.Stats) uint64 { return s.Deletes }))
	counter("gets_total", "Gets.", u(func(s *store.Stats) uint64 { return s.Gets }))
	counter("hits_total", "Gets that returned a packet.", u(func(s *store.Stats) uint64 { return s.Hits }))
	counter("misses_total", "Gets of an absent packet.", u(func(s *store.Stats) uint64 { return s.Misses }))
	counter("written_bytes_total", "Extent bytes written to blob files.", u(func(s *store.Stats) uint64 { return s.BytesWritten }))
	counter("read_bytes_total", "Chunk bytes returned through views.", u(func(s *store.Stats) uint64 { return s.BytesRead }))
	counter("checked_bytes_total", "Chunk bytes verified against their CRC32C on read.", u(func(s *store.Stats) uint64 { return s.BytesChecked }))
	counter("corruptions_total", "Chunks that failed their CRC32C on read.", u(func(s *store.Stats) uint64 { return s.Corruptions }))
	counter("compactions_total", "Compactions that rewrote at least one blob file.", u(func(s *store.Stats) uint64 { return s.Compactions }))
	counter("compacted_bytes_total", "Bytes copied by compaction.", u(func(s *store.Stats) uint64 { return s.CompactedBytes }))
	counter("reclaimed_bytes_total", "Bytes of blob files removed by compaction and GC.", u(func(s *store.Stats) uint64 { return s.ReclaimedBytes }))
	counter("gc_runs_total", "GC runs.", u(func(s *store.Stats) uint64 { return s.GCRuns }))
	counter("evictions_total", "Packets evicted to stay within MaxBytes.", u(func(s *store.Stats) uint64 { return s.Evictions }))
	counter("evicted_bytes_total", "Extent bytes evicted.", u(func(s *store.Stats) uint64 { return s.EvictedBytes }))
	counter("events_dropped_total", "Events dropped because a subscriber's channel was full.", u(func(s *store.Stats) uint64 { return s.EventsDropped }))
	counter("assembles_total", "Assemble calls.", u(func(s *store.Stats) uint64 { return s.Assembles }))
	counter("assembled_packets_total", "Packets (items) given to Assemble calls.", u(func(s *store.Stats) uint64 { return s.AssembledPackets }))
	gauge("span_memories", "Stored span memories (contexts).", u(func(s *store.Stats) uint64 { return s.SpanMemories }))
	gauge("packets", "Live packets.", u(func(s *store.Stats) uint64 { return s.Packets }))
	gauge("live_bytes", "Bytes of live extents.", u(func(s *store.Stats) uint64 { return s.LiveBytes }))
	gauge("dead_bytes", "Bytes of deleted extents not yet reclaimed.", u(func(s *store.Stats) uint64 { return s.DeadBytes }))
	gauge("compaction_debt_bytes", "Dead bytes in blob files below the compaction live ratio.", u(func(s *store.Stats) uint64 { return s.CompactionDebt }))
	gauge("blob_files", "Catalogued blob files.", func(s *store.Stats) float64 { return float64(len(s.BlobFiles)) })
	gauge("open_views", "Views not yet released.", func(s *store.Stats) float64 { return float64(s.OpenViews) })
	gauge("pinned_packets", "Packets pinned against eviction.", func(s *store.Stats) float64 { return float64(s.PinnedPackets) })
	gauge("max_bytes", "The store's MaxBytes (0: no cap).", func(s *store.Stats) float64 { return float64(s.CapacityMaxBytes) })
	return c
}

// Describe sends every metric's description.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, m := range c.scalars {
		ch <- m.desc
	}
	for _, h := range c.latencies {
		ch <- h.desc
	}
}

// Collect takes one Stats snapshot and sends every metric.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	s := c.src.Stats()
	for _, m := range c.scalars {
		ch <- prometheus.MustNewConstMetric(m.desc, m.kind, m.value(&s))
	}
	for _, h := range c.latencies {
		ch <- h.metric(h.value(&s))
	}
}

// metric turns per-bucket counts into a Prometheus histogram (cumulative
// buckets, +Inf implied by the count).
func (h *latencyMetric) metric(l store.Latency) prometheus.Metric {
	buckets := make(map[float64]uint64, len(h.buckets))
	var cum uint64
	for i, le := range h.buckets {
		if i < len(l.Buckets) {
			cum += l.Buckets[i]
		}
		buckets[le] = cum
	}
	return prometheus.MustNewConstHistogram(h.desc, l.Count, l.Sum.Seconds(), buckets)
}

var _ prometheus.Collector = (*Collector)(nil)
