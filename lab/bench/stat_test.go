package bench

import (
	"fmt"
	"testing"
	"time"
)

func TestNewStat(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		ds   []time.Duration
		med  time.Duration
		mbps float64
	}{
		{[]time.Duration{3 * ms, 1 * ms, 2 * ms}, 2 * ms, 1e6 / 2e-3 / 1e6},
		{[]time.Duration{4 * ms, 1 * ms, 2 * ms, 8 * ms}, 3 * ms, 1e6 / 3e-3 / 1e6},
		{[]time.Duration{5 * ms}, 5 * ms, 1e6 / 5e-3 / 1e6},
	} {
		t.Run(fmt.Sprint(tc.ds), func(t *testing.T) {
			s := newStat(1e6, tc.ds)
			if s.Median != tc.med || s.Runs != len(tc.ds) {
				t.Fatalf("newStat(%v): median %v runs %d, want %v %d", tc.ds, s.Median, s.Runs, tc.med, len(tc.ds))
			}
			if d := s.MBps - tc.mbps; d > 1e-9 || d < -1e-9 {
				t.Fatalf("newStat(%v): %v MB/s, want %v", tc.ds, s.MBps, tc.mbps)
			}
		})
	}
	if newStat(1, nil) != nil {
		t.Fatal("newStat of no runs is not nil")
	}
	a, b := newStat(100, []time.Duration{ms, 4 * ms, 4 * ms}), newStat(100, []time.Duration{2 * ms, 2 * ms, 8 * ms})
	b.ratioTo(a)
	if b.Ratio != 2 || b.BestRatio != 0.5 {
		t.Fatalf("ratios %v (median), %v (best); want 2 and 0.5", b.Ratio, b.BestRatio)
	}
	if a.BestMBps != 100/1e-3/1e6 {
		t.Fatalf("best %v MB/s", a.BestMBps)
	}
}

func TestPairedRatio(t *testing.T) {
	ms := time.Millisecond
	// Round by round, plain over store: 1/2, 4/1, 4/4 -> sorted 0.5, 1, 4.
	plain := newStat(100, []time.Duration{ms, 4 * ms, 4 * ms})
	store := newStat(100, []time.Duration{2 * ms, ms, 4 * ms})
	store.ratioTo(plain)
	if store.PairedRatio != 1 {
		t.Fatalf("paired ratio %v, want 1 (the median of 0.5, 4, 1)", store.PairedRatio)
	}
	// The ratio of medians differs: 4 ms over 2 ms.
	if store.Ratio != 2 {
		t.Fatalf("ratio of medians %v, want 2", store.Ratio)
	}
	for _, tc := range []struct {
		ds, base []time.Duration
		want     float64
	}{
		{[]time.Duration{ms, ms}, []time.Duration{2 * ms, 4 * ms}, 3},
		{[]time.Duration{ms}, []time.Duration{ms, ms}, 0}, // different rounds
		{[]time.Duration{0}, []time.Duration{ms}, 0},
		{nil, nil, 0},
	} {
		if got := pairedRatio(tc.ds, tc.base); got != tc.want {
			t.Errorf("pairedRatio(%v, %v) = %v, want %v", tc.ds, tc.base, got, tc.want)
		}
	}
}
