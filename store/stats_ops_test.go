package store

import (
	"context"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/kvstore/kvstore/format"
)

// Get, Put and Assemble are each timed once per call, errors included, and
// Assemble counts its calls and items.
func TestOpLatencies(t *testing.T) {
	spec := testSpec(format.DTypeBF16, 2, 2, 16)
	db := openMem(t, vfs.NewMem(), nil)
	defer db.Close()
	ids := putAll(t, db, []*Packet{floatPacket(spec, "ns", 8, 0, 0, 1), floatPacket(spec, "ns", 4, 0, 0, 2)})
	v, err := db.Get(context.Background(), "ns", spec.Fingerprint(), ids[0])
	if err != nil {
		t.Fatal(err)
	}
	v.Release()
	if _, err := db.Get(context.Background(), "ns", spec.Fingerprint(), format.PacketID{1}); err == nil {
		t.Fatal("Get of an absent packet succeeded")
	}
	d := NewContiguousDest(spec, 12)
	if err := db.Assemble(context.Background(), "ns", spec.Fingerprint(), []AssembleItem{{ids[0], 0}, {ids[1], 8}}, d, nil); err != nil {
		t.Fatal(err)
	}
	s := db.Stats()
	if s.Gets != 4 { // two here, one per item in Assemble
		t.Fatalf("Gets %d, want 4", s.Gets)
	}
	for _, c := range []struct {
		name string
		l    Latency
		n    uint64
	}{{"Put", s.PutLatency, 2}, {"Get", s.GetLatency, s.Gets}, {"Assemble", s.AssembleLatency, 1}, {"span read", s.SpanReadLatency, 0}} {
		var sum uint64
		for _, b := range c.l.Buckets {
			sum += b
		}
		if c.l.Count != c.n || sum != c.n || len(c.l.Buckets) != len(LatencyBuckets)+1 || (c.n > 0 && c.l.Sum <= 0) {
			t.Errorf("%s latency %+v, want %d calls over %d buckets", c.name, c.l, c.n, len(LatencyBuckets)+1)
		}
	}
	if s.Assembles != 1 || s.AssembledPackets != 2 {
		t.Errorf("Assembles %d, AssembledPackets %d, want 1 and 2", s.Assembles, s.AssembledPackets)
	}
}

// Each span memory block read (Resident reads a K and a V block) is timed.
func TestSpanReadLatency(t *testing.T) {
	db, _, _ := openSpanDB(t, false)
	defer db.Close()
	_, in := spanFixture(t, 48, 0, format.DTypeF32)
	m := buildSpans(t, db, in, SpanOptions{})
	r := putOpenSpan(t, db, m, "ctx-1")
	defer r.Release()
	before := db.Stats().SpanReadLatency.Count
	if _, _, err := r.Resident(1); err != nil {
		t.Fatal(err)
	}
	if got := db.Stats().SpanReadLatency.Count - before; got != 2 {
		t.Fatalf("Resident timed %d block reads, want 2", got)
	}
}
