// Package opstats holds the store's operation statistics that are not
// plain counters: latency histograms of the public calls (Hist, over
// LatencyBuckets) and counters of fsyncs with their maximum latency and
// histogram (Sync, over SyncBuckets), each updated without locks, and a
// histogram's snapshot (Latency; the store's Latency is a copy of it).
//
// It takes durations and hands back snapshots; it touches no file, and
// the store decides what to time (store/stats_ops.go).
package opstats
