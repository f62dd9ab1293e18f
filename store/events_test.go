package store

import (
	"context"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/kvstore/kvstore/format"
)

func TestSubscribeStoredRemovedCompacted(t *testing.T) {
	fs := vfs.NewMem()
	db := openMem(t, fs, opsOptions(fs))
	defer db.Close()
	ch, cancel := db.Subscribe(64)
	x := newOpsFixture(t, db, fs, 6)
	counts := map[EventKind]int{}
	for len(ch) > 0 {
		ev := <-ch
		if ev.Namespace != "ns" || ev.Model != x.spec.Fingerprint() || ev.Dropped != 0 {
			t.Fatalf("event %+v", ev)
		}
		counts[ev.Kind]++
	}
	if counts[EventPacketStored] != 6 || counts[EventPacketRemoved] != len(x.deleted) {
		t.Fatalf("events: %v", counts)
	}
	rep := mustCompact(t, db, CompactOptions{LiveRatio: 1})
	n := 0
	for len(ch) > 0 {
		if ev := <-ch; ev.Kind == EventCompacted {
			n++
		}
	}
	if n != rep.Extents {
		t.Fatalf("%d compacted events for %d extents moved", n, rep.Extents)
	}
	cancel()
	cancel() // idempotent
	if _, ok := <-ch; ok {
		t.Fatal("channel open after cancel")
	}
	if _, err := db.Put(context.Background(), randPacket(x.spec, "ns", 10, 99)); err != nil {
		t.Fatal(err) // publishing with no subscriber
	}
}

// TestSubscribeSlowSubscriberDrops: a full channel never blocks a Put;
// the subscriber sees how many it missed.
func TestSubscribeSlowSubscriberDrops(t *testing.T) {
	fs := vfs.NewMem()
	db := openMem(t, fs, opsOptions(fs))
	defer db.Close()
	ch, cancel := db.Subscribe(1)
	defer cancel()
	spec := testSpec(format.DTypeF32, 1, 1, 8)
	for i := range 4 {
		if _, err := db.Put(context.Background(), randPacket(spec, "ns", 5, uint64(i))); err != nil {
			t.Fatal(err)
		}
	}
	if ev := <-ch; ev.Dropped != 0 {
		t.Fatalf("first event: %+v", ev)
	}
	if _, err := db.Put(context.Background(), randPacket(spec, "ns", 5, 10)); err != nil {
		t.Fatal(err)
	}
	if ev := <-ch; ev.Dropped != 3 {
		t.Fatalf("after 3 drops: %+v", ev)
	}
	if s := db.Stats(); s.EventsDropped != 3 {
		t.Fatalf("EventsDropped %d", s.EventsDropped)
	}
}

// TestStatsOps: hits, misses, bytes and sync latencies move as they should.
func TestStatsOps(t *testing.T) {
	fs := vfs.NewMem()
	db := openMem(t, fs, opsOptions(fs))
	defer db.Close()
	x := newOpsFixture(t, db, fs, 3)
	x.checkAll(t, db)
	if _, err := db.Get(context.Background(), "ns", x.spec.Fingerprint(), x.deleted[0]); err == nil {
		t.Fatal("Get of a deleted packet")
	}
	s := db.Stats()
	var hist uint64
	for _, n := range s.BlobSyncHist {
		hist += n
	}
	if s.Hits != uint64(len(x.packets)) || s.Misses != 1 || s.BytesRead == 0 || s.BytesWritten == 0 ||
		hist != s.BlobSyncs || s.BlobSyncs != s.Puts+s.Deletes /* one per extent, tombstones included */ || s.BlobSyncMax == 0 || s.BlobSyncMax > s.BlobSyncTime {
		t.Fatalf("stats: %+v", s)
	}
	if _, err := db.GC(context.Background(), GCOptions{}); err != nil {
		t.Fatal(err)
	}
	if db.Stats().GCRuns != 1 {
		t.Fatal("GCRuns not counted")
	}
	// The catalog's syncs run behind the writes (catalog.Syncer); Close
	// waits for them.
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if s := db.Stats(); s.CatalogSyncs == 0 || s.CatalogSyncMax == 0 || s.CatalogSyncMax > s.CatalogSyncTime {
		t.Fatalf("catalog sync stats after Close: %+v", s)
	}
}

// TestEventKindString: each kind has its name; any other value is
// "unknown".
func TestEventKindString(t *testing.T) {
	for _, c := range []struct {
		k    EventKind
		want string
	}{
		{EventPacketStored, "stored"}, {EventPacketRemoved, "removed"}, {EventEvicted, "evicted"},
		{EventCompacted, "compacted"}, {0, "unknown"}, {EventCompacted + 1, "unknown"},
	} {
		if got := c.k.String(); got != c.want {
			t.Errorf("EventKind(%d).String() = %q, want %q", int(c.k), got, c.want)
		}
	}
}
