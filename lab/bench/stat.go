package bench

import (
	"slices"
	"time"
)

// Stat summarises the timed runs of one operation.
type Stat struct {
	Runs int `json:"runs"`
	// Bytes is the payload one run moves.
	Bytes  int64         `json:"bytes"`
	Median time.Duration `json:"median_ns"`
	Min    time.Duration `json:"min_ns"`
	Max    time.Duration `json:"max_ns"`
	// MBps is Bytes over the median time, in 10^6 bytes per second.
	MBps float64 `json:"mb_per_s"`
	// Ratio is MBps over the plain-file figure of the same operation in the
	// same case; 0 when plain files were not measured.
	Ratio float64 `json:"ratio_to_plain,omitempty"`
	// BestMBps is Bytes over the fastest run, and BestRatio its ratio to
	// plain files' fastest: on a shared machine, interference only ever
	// adds time, so the best run is the least disturbed one.
	BestMBps  float64 `json:"best_mb_per_s"`
	BestRatio float64 `json:"best_ratio_to_plain,omitempty"`
	// PairedRatio is the median, over the rounds, of plain files' time
	// over this store's time in the same round (the stores take turns
	// within a round, so a slow spell of the disk or the machine hits both
	// sides of a pair): steadier than Ratio, a ratio of medians taken
	// apart. 0 when plain files were not measured or ran a different
	// number of rounds.
	PairedRatio float64 `json:"paired_ratio_to_plain,omitempty"`
	// Samples are the runs' times in the order they ran.
	Samples []time.Duration `json:"samples_ns"`
}

// newStat summarises durations of runs that each moved bytes.
func newStat(bytes int64, ds []time.Duration) *Stat {
	if len(ds) == 0 {
		return nil
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	med := s[len(s)/2]
	if len(s)%2 == 0 {
		med = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	st := &Stat{Runs: len(s), Bytes: bytes, Median: med, Min: s[0], Max: s[len(s)-1], Samples: slices.Clone(ds)}
	if med > 0 {
		st.MBps = float64(bytes) / med.Seconds() / 1e6
	}
	if s[0] > 0 {
		st.BestMBps = float64(bytes) / s[0].Seconds() / 1e6
	}
	return st
}

// ratioTo sets s.Ratio against base; either may be nil.
func (s *Stat) ratioTo(base *Stat) {
	if s != nil && base != nil && base.MBps > 0 {
		s.Ratio = s.MBps / base.MBps
	}
	if s != nil && base != nil && base.BestMBps > 0 {
		s.BestRatio = s.BestMBps / base.BestMBps
	}
	if s != nil && base != nil {
		s.PairedRatio = pairedRatio(s.Samples, base.Samples)
	}
}

// pairedRatio is the median of base[i]/ds[i] over the rounds i, 0 when the
// two did not run the same rounds or a time is not positive.
func pairedRatio(ds, base []time.Duration) float64 {
	if len(ds) == 0 || len(ds) != len(base) {
		return 0
	}
	rs := make([]float64, len(ds))
	for i := range ds {
		if ds[i] <= 0 || base[i] <= 0 {
			return 0
		}
		rs[i] = float64(base[i]) / float64(ds[i])
	}
	slices.Sort(rs)
	if n := len(rs); n%2 == 0 {
		return (rs[n/2-1] + rs[n/2]) / 2
	}
	return rs[len(rs)/2]
}
