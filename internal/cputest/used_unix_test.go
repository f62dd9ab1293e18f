//go:build unix

package cputest

import (
	"runtime"
	"testing"
	"time"
)

// TestUsedCountsWork spins in user code until Used has grown by 20ms (a
// figure that leaves out user time never gets there) and wants the growth
// to be no more than the wall time on every core.
func TestUsedCountsWork(t *testing.T) {
	before := Used()
	if before <= 0 {
		t.Fatalf("Used = %v before any work, want the CPU time the test binary has used so far", before)
	}
	const want, limit = 20 * time.Millisecond, 10 * time.Second
	start, x := time.Now(), uint64(1)
	grew := time.Duration(0)
	for ; grew < want && time.Since(start) < limit; grew = Used() - before {
		for i := 0; i < 100000; i++ {
			x = x*6364136223846793005 + 1442695040888963407
		}
	}
	wall := time.Since(start)
	if grew < want {
		t.Fatalf("Used grew by %v in %v of spinning, want %v (x=%d)", grew, wall, want, x)
	}
	if max := wall*time.Duration(runtime.NumCPU()) + 10*time.Millisecond; grew > max {
		t.Fatalf("Used grew by %v in %v of spinning on %d CPUs, more than %v", grew, wall, runtime.NumCPU(), max)
	}
}
