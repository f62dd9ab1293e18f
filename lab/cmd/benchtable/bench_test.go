package main

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

const benchOutput = `goos: linux
goarch: amd64
pkg: github.com/kvstore/kvstore/store
cpu: AMD EPYC
BenchmarkPutPaired-2   	      10	 130000000 ns/op	 966.00 MB/s	       700.0 kvstore-MB/s	         1.05 x-plain	         1.07 x-plain-median
BenchmarkPutPaired-2   	      10	 130000000 ns/op	 966.00 MB/s	       700.0 kvstore-MB/s	         0.97 x-plain	         1.01 x-plain-median
BenchmarkPutPaired-2   	      10	 130000000 ns/op	 966.00 MB/s	       700.0 kvstore-MB/s	         1.15 x-plain	         1.18 x-plain-median
BenchmarkAssemble/contiguous-workers-1-2         	      20	  1.0 x-memcpy
BenchmarkAssemble/contiguous-workers-N-2         	      20	  0.91 x-memcpy
BenchmarkAssemble/contiguous-workers-N-2         	      20	  0.99 x-memcpy
PASS
ok  	github.com/kvstore/kvstore/store	12.3s
pkg: github.com/kvstore/kvstore/internal/crc32c
BenchmarkChecksumPaired/2MiB 	     100	     25000 ns/op	  3.43 x-std
BenchmarkChecksumPaired/2MiB 	     100	     25000 ns/op	  2.90 x-std
`

func parsed(t *testing.T) Samples {
	t.Helper()
	s := Samples{}
	if err := ParseBench(strings.NewReader(benchOutput), s); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestLookup(t *testing.T) {
	s := parsed(t)
	for _, tc := range []struct {
		metric string
		want   []float64
	}{
		{"store:BenchmarkPutPaired:x-plain", []float64{0.97, 1.05, 1.15}},
		{"store:BenchmarkPutPaired:x-plain-median", []float64{1.01, 1.07, 1.18}},
		{"store:BenchmarkAssemble/contiguous-workers-N:x-memcpy", []float64{0.91, 0.99}},
		{"store:BenchmarkAssemble/contiguous-workers-1:x-memcpy", []float64{1.0}},     // "-1-2": the name's own -1, then GOMAXPROCS
		{"internal/crc32c:BenchmarkChecksumPaired/2MiB:x-std", []float64{2.90, 3.43}}, // -cpu 1: no suffix
		{"store:BenchmarkPut:x-plain", nil},                                           // a prefix of a name is not the name
		{"codec:BenchmarkPutPaired:x-plain", nil},                                     // another package
		{"store:BenchmarkPutPaired:x-memcpy", nil},                                    // another unit
		{"store:BenchmarkAssemble/contiguous:x-memcpy", nil},
	} {
		t.Run(tc.metric, func(t *testing.T) {
			if got := s.Lookup(tc.metric); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("Lookup = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestParseBenchRefuses(t *testing.T) {
	for _, tc := range []struct{ name, in string }{
		{"a result before pkg", "BenchmarkX-2 10 1.0 x-plain\n"},
		{"a value that is no number", "pkg: github.com/kvstore/kvstore/store\nBenchmarkX-2 10 fast x-plain\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := ParseBench(strings.NewReader(tc.in), Samples{}); !errors.Is(err, errBench) {
				t.Fatalf("ParseBench = %v, want errBench", err)
			}
		})
	}
}

func TestUpdate(t *testing.T) {
	rows := []Row{
		{Area: "Store", Benchmark: "Put", Figure: "old", Target: ">= 0.95x", Status: "not met", Date: "2026-01-01", Commit: "0000000", Metric: "store:BenchmarkPutPaired:x-plain", Goal: ">=0.95"},
		{Area: "Store", Benchmark: "Assemble", Figure: "old", Target: ">= 1x", Status: "met", Date: "2026-01-01", Commit: "0000000", Metric: "store:BenchmarkAssemble/contiguous-workers-N:x-memcpy", Goal: ">=1"},
		{Area: "CRC", Benchmark: "CRC", Figure: "old", Date: "2026-01-01", Commit: "0000000", Metric: "internal/crc32c:BenchmarkChecksumPaired/2MiB:x-std"},
		{Area: "Store", Benchmark: "Get", Figure: "kept", Date: "2026-01-01", Commit: "0000000", Metric: "store:BenchmarkGet:ns/op"},
		{Area: "Store", Benchmark: "by hand", Figure: "kept", Date: "2026-01-01", Commit: "0000000"},
	}
	n, err := Update(rows, parsed(t), "2026-12-02", "a485253")
	if err != nil {
		t.Fatal(err)
	}
	if n != 3 {
		t.Fatalf("updated %d rows, want 3", n)
	}
	for _, tc := range []struct {
		i              int
		figure, status string
	}{
		{0, "**median 1.05x plain** (0.97-1.15, 3 runs)", "met (median)"},
		{1, "**median 0.95x memcpy** (0.91-0.99, 2 runs)", "not met (median)"},
		{2, "**median 3.17x std** (2.90-3.43, 2 runs)", ""},
		{3, "kept", ""},
		{4, "kept", ""},
	} {
		r := rows[tc.i]
		if r.Figure != tc.figure || r.Status != tc.status {
			t.Errorf("row %s: figure %q status %q, want %q %q", r.Benchmark, r.Figure, r.Status, tc.figure, tc.status)
		}
		updated := tc.i < 3
		if got := r.Date == "2026-12-02" && r.Commit == "a485253"; got != updated {
			t.Errorf("row %s: date %s commit %s, updated %v", r.Benchmark, r.Date, r.Commit, updated)
		}
	}
}

func TestFigureFormats(t *testing.T) {
	for _, tc := range []struct {
		vals []float64
		unit string
		want string
	}{
		{[]float64{1.0234}, "x-plain", "**1.02x plain** (1 run)"},
		{[]float64{10.04, 22.4, 26.6}, "speedup", "**median 22.4x** (10.0-26.6, 3 runs)"},
		{[]float64{119000, 177000}, "ns/op", "**median 148000 ns/op** (119000-177000, 2 runs)"},
		{[]float64{0.5, 0.7}, "x_memcpy", "**median 0.60x memcpy** (0.50-0.70, 2 runs)"},
	} {
		if got := figure(tc.vals, median(tc.vals), tc.unit); got != tc.want {
			t.Errorf("figure(%v, %s) = %q, want %q", tc.vals, tc.unit, got, tc.want)
		}
	}
}
