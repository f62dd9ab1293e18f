package store

import (
	"context"
	"errors"
	"testing"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store/internal/catalog"
)

// collectSpanMemories returns every SpanMemories entry.
func collectSpanMemories(t *testing.T, db *DB) []SpanMemoryInfo {
	t.Helper()
	var out []SpanMemoryInfo
	if err := db.SpanMemories(func(i SpanMemoryInfo) error {
		out = append(out, i)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestSpanMemories(t *testing.T) {
	db, fs, dir := openSpanDB(t, false)
	_, in := spanFixture(t, 64, 3, format.DTypeBF16)
	m := buildSpans(t, db, in, SpanOptions{ProjectionDim: 4})
	names := []struct{ ns, name string }{{"b", "x"}, {"a", "z"}, {"a", "y"}}
	for _, n := range names {
		if _, err := db.PutSpanMemory(context.Background(), n.ns, n.name, m); err != nil {
			t.Fatal(err)
		}
	}
	got := collectSpanMemories(t, db)
	want := []struct{ ns, name string }{{"a", "y"}, {"a", "z"}, {"b", "x"}} // catalog order
	if len(got) != len(want) {
		t.Fatalf("%d span memories, want %d", len(got), len(want))
	}
	factored := 0
	for _, s := range m.Segmentation.Spans {
		if s.Factored {
			factored++
		}
	}
	for i, info := range got {
		r, err := db.OpenSpanMemory(context.Background(), want[i].ns, m.Model.Fingerprint(), want[i].name)
		if err != nil {
			t.Fatal(err)
		}
		meta := r.Meta()
		switch {
		case info.Namespace != want[i].ns || info.Name != want[i].name:
			t.Errorf("entry %d is %q/%q, want %q/%q", i, info.Namespace, info.Name, want[i].ns, want[i].name)
		case info.Context != ComputeContextID(want[i].ns, m.Model.Fingerprint(), want[i].name) || info.Model != m.Model.Fingerprint():
			t.Errorf("entry %d: context %s model %s", i, info.Context.Short(), info.Model.Short())
		case info.Tokens != 64 || info.Spans != len(m.Segmentation.Spans) || info.Factored != factored || factored == 0 ||
			info.Anchors != len(m.Segmentation.Anchors) || info.Resident != len(m.Resident):
			t.Errorf("entry %d: %+v; memory has %d spans (%d factored), %d anchors, %d resident",
				i, info, len(m.Segmentation.Spans), factored, len(m.Segmentation.Anchors), len(m.Resident))
		case info.Layers != 2 || info.KVHeads != 2 || info.HeadDim != 16 || info.ProjDim != 4 ||
			info.ResidentDType != format.DTypeBF16 || info.FactorDType != m.FactorDType || info.Projection != m.Projection.Name:
			t.Errorf("entry %d shape: %+v", i, info)
		case info.BlobFile != meta.BlobFile || info.ExtentOffset != meta.ExtentOffset || info.ExtentLength != meta.ExtentLength ||
			info.ExtentLength == 0 || info.Created.UnixNano() != meta.CreatedUnixNs:
			t.Errorf("entry %d extent: %+v, root record %+v", i, info, meta)
		}
		r.Release()
	}
	stop := errors.New("stop")
	n := 0
	if err := db.SpanMemories(func(SpanMemoryInfo) error { n++; return stop }); err != stop || n != 1 {
		t.Fatalf("stopping walk: %v after %d", err, n)
	}
	if err := db.DeleteSpanMemory(context.Background(), "a", m.Model.Fingerprint(), "z"); err != nil {
		t.Fatal(err)
	}
	if got := collectSpanMemories(t, db); len(got) != 2 || got[1].Name != "x" {
		t.Fatalf("after delete: %+v", got)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := db.SpanMemories(func(SpanMemoryInfo) error { return nil }); !errors.Is(err, ErrClosed) {
		t.Fatalf("closed: %v", err)
	}
	db, err := Open(dir, &Options{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if got := collectSpanMemories(t, db); len(got) != 2 {
		t.Fatalf("after reopen: %d span memories", len(got))
	}
}

// A root record that does not decode stops the walk with ErrCorruption.
func TestSpanMemoriesCorruptRecord(t *testing.T) {
	db, _, _ := openSpanDB(t, false)
	defer db.Close()
	if err := db.cat.DB.Set(catalog.SpanMetaKey("ns", "bad"), []byte("not a record"), nil); err != nil {
		t.Fatal(err)
	}
	err := db.SpanMemories(func(SpanMemoryInfo) error { return nil })
	if !errors.Is(err, ErrCorruption) {
		t.Fatalf("corrupt root record: %v", err)
	}
}

// Stats counts packets and span memories apart, across puts, replaces,
// deletes and a reopen.
func TestStatsCountsSpanMemories(t *testing.T) {
	db, fs, dir := openSpanDB(t, false)
	_, in := spanFixture(t, 48, 0, format.DTypeBF16)
	m := buildSpans(t, db, in, SpanOptions{})
	want := func(where string, packets, spans uint64) {
		t.Helper()
		if s := db.Stats(); s.Packets != packets || s.SpanMemories != spans {
			t.Fatalf("%s: %d packets, %d span memories; want %d, %d", where, s.Packets, s.SpanMemories, packets, spans)
		}
	}
	want("empty", 0, 0)
	if _, err := db.Put(context.Background(), statsPacket(t, in.Model, 1)); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"one", "two"} {
		if _, err := db.PutSpanMemory(context.Background(), "ns", name, m); err != nil {
			t.Fatal(err)
		}
	}
	want("1 packet, 2 memories", 1, 2)
	if _, err := db.PutSpanMemory(context.Background(), "ns", "two", m); err != nil { // replace
		t.Fatal(err)
	}
	pid, err := db.Put(context.Background(), statsPacket(t, in.Model, 2))
	if err != nil {
		t.Fatal(err)
	}
	want("replace, second packet", 2, 2)
	if err := db.DeleteSpanMemory(context.Background(), "ns", m.Model.Fingerprint(), "one"); err != nil {
		t.Fatal(err)
	}
	if err := db.Delete(context.Background(), "ns", m.Model.Fingerprint(), pid); err != nil {
		t.Fatal(err)
	}
	want("deletes", 1, 1)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if db, err = Open(dir, &Options{FS: fs}); err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	want("reopened", 1, 1)
}

// statsPacket is a one-token-per-seed packet of spec in namespace "ns".
func statsPacket(t *testing.T, spec *format.ModelSpec, seed int) *Packet {
	t.Helper()
	p := &Packet{PacketDesc: format.PacketDesc{Namespace: "ns", Model: spec, TokenIDs: []uint32{uint32(seed), uint32(seed + 1)}}}
	size := spec.KVHeads * p.Tokens() * spec.HeadDim * spec.DType.Size()
	for range spec.Layers {
		k, v := make([]byte, size), make([]byte, size)
		for i := range k {
			k[i], v[i] = byte(seed+i), byte(seed*3+i)
		}
		p.Layers = append(p.Layers, Layer{K: k, V: v})
	}
	return p
}
