package opstats

import (
	"sync/atomic"
	"time"
)

// SyncBuckets are the upper bounds of the fsync latency histograms.
var SyncBuckets = []time.Duration{
	100 * time.Microsecond, 250 * time.Microsecond, 500 * time.Microsecond,
	time.Millisecond, 2500 * time.Microsecond, 5 * time.Millisecond, 10 * time.Millisecond,
	25 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond, 250 * time.Millisecond, time.Second,
}

// Sync counts calls of one kind of sync (the embedded counter: Load is
// the number of calls), their maximum latency and their latency histogram
// over SyncBuckets, without locks. The zero value is empty and ready.
type Sync struct {
	atomic.Uint64 // calls
	maxNanos      atomic.Uint64
	hist          [13]atomic.Uint64 // len(SyncBuckets)+1
}

// Observe counts one call of duration d.
func (c *Sync) Observe(d time.Duration) {
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

// Max is the longest call observed.
func (c *Sync) Max() time.Duration { return time.Duration(c.maxNanos.Load()) }

// Histogram returns the calls per SyncBuckets bound (not cumulative); the
// last count is of calls above every bound.
func (c *Sync) Histogram() []uint64 {
	h := make([]uint64, len(c.hist))
	for i := range h {
		h[i] = c.hist[i].Load()
	}
	return h
}
