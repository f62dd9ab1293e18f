package opstats

import (
	"sync/atomic"
	"time"
)

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

// Hist is one operation's latency histogram, updated without locks. The
// zero value is empty and ready.
type Hist struct {
	nanos atomic.Uint64
	hist  [19]atomic.Uint64 // len(LatencyBuckets)+1
}

// Observe adds one call of duration d: to the first bucket whose bound is
// not below d, or the last one when d is above every bound.
func (l *Hist) Observe(d time.Duration) {
	l.nanos.Add(uint64(max(d, 0)))
	i := 0
	for i < len(LatencyBuckets) && d > LatencyBuckets[i] {
		i++
	}
	l.hist[i].Add(1)
}

// Timer starts timing one call; calling what it returns observes it:
// "defer h.Timer()()".
func (l *Hist) Timer() func() {
	start := time.Now()
	return func() { l.Observe(time.Since(start)) }
}

// Snapshot returns the histogram as it is now.
func (l *Hist) Snapshot() Latency {
	s := Latency{Sum: time.Duration(l.nanos.Load()), Buckets: make([]uint64, len(l.hist))}
	for i := range l.hist {
		s.Buckets[i] = l.hist[i].Load()
		s.Count += s.Buckets[i]
	}
	return s
}
