package opstats

import (
	"testing"
	"time"
)

// Observe puts a duration in the first bucket whose bound is not below it;
// above every bound is the last bucket.
func TestLatencyBuckets(t *testing.T) {
	var l Hist
	if len(l.hist) != len(LatencyBuckets)+1 {
		t.Fatalf("%d buckets for %d bounds", len(l.hist), len(LatencyBuckets))
	}
	for _, d := range []time.Duration{0, 10 * time.Microsecond, 11 * time.Microsecond, time.Second, time.Minute} {
		l.Observe(d)
	}
	s := l.Snapshot()
	if s.Count != 5 || s.Buckets[0] != 2 || s.Buckets[1] != 1 || s.Buckets[15] != 1 || s.Buckets[18] != 1 ||
		s.Sum != 21*time.Microsecond+time.Second+time.Minute {
		t.Fatalf("snapshot %+v", s)
	}
}

// A timer observes one call, of at least the time it ran.
func TestTimer(t *testing.T) {
	var l Hist
	done := l.Timer()
	time.Sleep(time.Millisecond)
	done()
	if s := l.Snapshot(); s.Count != 1 || s.Sum < time.Millisecond {
		t.Fatalf("snapshot %+v, want one call of at least 1ms", s)
	}
}
