package promstore

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
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
	for name, want := range map[string]float64{
		"kvstore_puts_total": 7, "kvstore_hits_total": 5, "kvstore_misses_total": 2,
		"kvstore_live_bytes": 4096, "kvstore_bytes_read_total": 123, "kvstore_compaction_debt_bytes": 8192,
		"kvstore_evictions_total": 4, "kvstore_blob_files": 2,
	} {
		if got := value(t, mfs, name); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	if len(mfs) != len(c.scalars)+2 {
		t.Errorf("%d families, want %d", len(mfs), len(c.scalars)+2)
	}
	if l := mfs["kvstore_puts_total"].Metric[0].Label; len(l) != 1 || l[0].GetName() != "store" || l[0].GetValue() != "a" {
		t.Errorf("labels %v", l)
	}
	h := mfs["kvstore_blob_sync_seconds"].Metric[0].GetHistogram()
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
	p := &store.Packet{Namespace: "ns", Model: spec, TokenIDs: []uint32{1},
		Layers: []store.Layer{{K: make([]byte, 8), V: make([]byte, 8)}}}
	if _, err := db.Put(p); err != nil {
		t.Fatal(err)
	}
	mfs := gather(t, c)
	if value(t, mfs, "kvstore_puts_total") != 1 || value(t, mfs, "kvstore_packets") != 1 || value(t, mfs, "kvstore_live_bytes") != 4096 {
		t.Fatalf("after a put: puts %v packets %v live %v", value(t, mfs, "kvstore_puts_total"),
			value(t, mfs, "kvstore_packets"), value(t, mfs, "kvstore_live_bytes"))
	}
	if h := mfs["kvstore_blob_sync_seconds"].Metric[0].GetHistogram(); h.GetSampleCount() != 1 {
		t.Fatalf("blob syncs: %v", h)
	}
}
