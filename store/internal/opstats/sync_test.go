package opstats

import (
	"testing"
	"time"
)

// Sync counts calls, keeps the longest, and buckets each as Hist does over
// SyncBuckets.
func TestSync(t *testing.T) {
	var c Sync
	if len(c.Histogram()) != len(SyncBuckets)+1 {
		t.Fatalf("%d buckets for %d bounds", len(c.Histogram()), len(SyncBuckets))
	}
	for _, d := range []time.Duration{50 * time.Microsecond, 100 * time.Microsecond, 3 * time.Millisecond, time.Minute, time.Millisecond} {
		c.Observe(d)
	}
	h := c.Histogram()
	if c.Load() != 5 || c.Max() != time.Minute || h[0] != 2 || h[3] != 1 || h[5] != 1 || h[12] != 1 {
		t.Fatalf("calls %d, max %v, histogram %v", c.Load(), c.Max(), h)
	}
}
