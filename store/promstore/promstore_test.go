package promstore

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store"
)

// fixed is a Source with a given snapshot.
type fixed store.Stats

func (f *fixed) Stats() store.Stats { return store.Stats(*f) }

// gather registers c in a pedantic registry (which checks descriptions
// against metrics) and returns the families by name.
func gather(t *testing.T, c prometheus.Collector) map[string]*dto.MetricFamily {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(c); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*dto.MetricFamily{}
	for _, mf := range mfs {
		out[mf.GetName()] = mf
	}
	return out
}

func value(t *testing.T, mfs map[string]*dto.MetricFamily, name string) float64 {
	t.Helper()
	mf := mfs[name]
	if mf == nil || len(mf.Metric) != 1 {
		t.Fatalf("metric %s missing", name)
	}
	m := mf.Metric[0]
	switch mf.GetType() {
	case dto.MetricType_COUNTER:
		return m.GetCounter().GetValue()
	case dto.MetricType_GAUGE:
		return m.GetGauge().GetValue()
	}
	t.Fatalf("metric %s has type %v", name, mf.GetType())
	return 0
}

func TestCollectorExposesStats(t *testing.T) {
	s := &fixed{Puts: 7, Hits: 5, Misses: 2, LiveBytes: 4096, BytesRead: 123,
		BlobSyncs: 3, BlobSyncTime: 3 * time.Millisecond, BlobFiles: make([]store.BlobFileInfo, 2)}
	s.CompactionDebt = 8192
	s.Evictions = 4
	s.BlobSyncHist = []uint64{1, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0}
	c := New(s, prometheus.Labels{"store": "a"})
	mfs := gather(t, c)
	for _, tc := range []struct {
		name string
		want float64
	}{
		{"kvstore_puts_total", 7}, {"kvstore_hits_total", 5}, {"kvstore_misses_total", 2},
		{"kvstore_live_bytes", 4096}, {"kvstore_read_bytes_total", 123}, {"kvstore_compaction_debt_bytes", 8192},
		{"kvstore_evictions_total", 4}, {"kvstore_blob_files", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := value(t, mfs, tc.name); got != tc.want {
				t.Errorf("%s = %v, want %v", tc.name, got, tc.want)
			}
		})
	}
	if len(mfs) != len(c.scalars)+len(c.latencies) {
		t.Errorf("%d families, want %d", len(mfs), len(c.scalars)+len(c.latencies))
	}
	if l := mfs["kvstore_puts_total"].Metric[0].Label; len(l) != 1 || l[0].GetName() != "store" || l[0].GetValue() != "a" {
		t.Errorf("labels %v", l)
	}
	h := mfs["kvstore_blob_sync_duration_seconds"].Metric[0].GetHistogram()
	if h.GetSampleCount() != 3 || h.GetSampleSum() != 0.003 || len(h.Bucket) != len(store.SyncBuckets) {
		t.Fatalf("histogram: %v", h)
	}
	wantCum := []uint64{1, 1, 1, 3}
	for i, w := range wantCum {
		if b := h.Bucket[i]; b.GetCumulativeCount() != w || b.GetUpperBound() != store.SyncBuckets[i].Seconds() {
			t.Errorf("bucket %d: %v, want le %v count %d", i, b, store.SyncBuckets[i].Seconds(), w)
		}
	}
}

// TestCollectorOnARealStore scrapes an open store before and after a Put.
func TestCollectorOnARealStore(t *testing.T) {
	db, err := store.Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	c := New(db, nil)
	if got := value(t, gather(t, c), "kvstore_puts_total"); got != 0 {
		t.Fatalf("puts on an empty store: %v", got)
	}
	spec := &format.ModelSpec{Architecture: "t", Layers: 1, KVHeads: 1, HeadDim: 2, DType: format.DTypeF32,
		RoPE: format.RoPE{Style: format.RoPERotateHalf, Theta: 10000}, WeightsID: "w"}
	p := &store.Packet{
		PacketDesc: format.PacketDesc{Namespace: "ns", Model: spec, TokenIDs: []uint32{1}},
		Layers:     []store.Layer{{K: make([]byte, 8), V: make([]byte, 8)}},
	}
	if _, err := db.Put(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	mfs := gather(t, c)
	if value(t, mfs, "kvstore_puts_total") != 1 || value(t, mfs, "kvstore_packets") != 1 || value(t, mfs, "kvstore_live_bytes") != 4096 {
		t.Fatalf("after a put: puts %v packets %v live %v", value(t, mfs, "kvstore_puts_total"),
			value(t, mfs, "kvstore_packets"), value(t, mfs, "kvstore_live_bytes"))
	}
	if h := mfs["kvstore_blob_sync_duration_seconds"].Metric[0].GetHistogram(); h.GetSampleCount() != 1 {
		t.Fatalf("blob syncs: %v", h)
	}
}

// Every metric passes the Prometheus linter (promlint: naming, units,
// counters ending in _total, help text) and follows the one scheme: no
// "bytes_" before the noun.
func TestCollectorLint(t *testing.T) {
	db, err := store.Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	c := New(db, nil)
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(c); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	problems, err := promlint.NewWithMetricFamilies(mfs).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
	for name := range gather(t, c) {
		if strings.HasPrefix(name, "kvstore_bytes_") || (strings.Contains(name, "_seconds") && !strings.HasSuffix(name, "_duration_seconds")) {
			t.Errorf("%s does not follow kvstore_<noun>_<unit>[_total]", name)
		}
	}
}

// The latency histograms, Assemble counters and span memory gauge carry
// the snapshot's values.
func TestCollectorLatencies(t *testing.T) {
	s := &fixed{SpanMemories: 3}
	s.Assembles, s.AssembledPackets = 2, 5
	s.PutLatency = store.Latency{Count: 3, Sum: 30 * time.Millisecond, Buckets: make([]uint64, len(store.LatencyBuckets)+1)}
	s.PutLatency.Buckets[0], s.PutLatency.Buckets[len(store.LatencyBuckets)] = 1, 2 // one fast, two above every bound
	s.SpanReadLatency = store.Latency{Count: 1, Sum: time.Millisecond, Buckets: make([]uint64, len(store.LatencyBuckets)+1)}
	s.SpanReadLatency.Buckets[6] = 1
	mfs := gather(t, New(s, nil))
	for _, tc := range []struct {
		name string
		want float64
	}{{"kvstore_assembles_total", 2}, {"kvstore_assembled_packets_total", 5}, {"kvstore_span_memories", 3}} {
		t.Run(tc.name, func(t *testing.T) {
			if got := value(t, mfs, tc.name); got != tc.want {
				t.Errorf("%s = %v, want %v", tc.name, got, tc.want)
			}
		})
	}
	h := mfs["kvstore_put_duration_seconds"].Metric[0].GetHistogram()
	last := h.Bucket[len(h.Bucket)-1]
	if h.GetSampleCount() != 3 || h.GetSampleSum() != 0.03 || len(h.Bucket) != len(store.LatencyBuckets) ||
		h.Bucket[0].GetCumulativeCount() != 1 || last.GetCumulativeCount() != 1 || last.GetUpperBound() != 10 {
		t.Fatalf("put histogram: %v", h)
	}
	h = mfs["kvstore_span_read_duration_seconds"].Metric[0].GetHistogram()
	if h.GetSampleCount() != 1 || h.Bucket[5].GetCumulativeCount() != 0 || h.Bucket[6].GetCumulativeCount() != 1 || h.Bucket[6].GetUpperBound() != 0.001 {
		t.Fatalf("span read histogram: %v", h)
	}
	for _, name := range []string{"kvstore_get_duration_seconds", "kvstore_assemble_duration_seconds", "kvstore_catalog_sync_duration_seconds"} {
		if mfs[name] == nil {
			t.Errorf("no %s", name)
		}
	}
}
