package store

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/kvstore/kvstore/format"
)

// capPacket is a packet with a 16 KiB extent.
func capPacket(seed uint64) *Packet {
	return randPacket(testSpec(format.DTypeBF16, 2, 2, 8), "ns", 100, seed)
}

const capExtent = 16 << 10

func capOptions(fs vfs.FS, n int, policy EvictionPolicy) *Options {
	return &Options{FS: fs, Logger: quiet, BlobFileSize: 1 << 20, MaxBytes: int64(n * capExtent), Eviction: policy}
}

func putCap(t *testing.T, db *DB, seed uint64) format.PacketID {
	t.Helper()
	id, err := db.Put(context.Background(), capPacket(seed))
	if err != nil {
		t.Fatalf("Put %d: %v", seed, err)
	}
	return id
}

func present(t *testing.T, db *DB, id format.PacketID) bool {
	t.Helper()
	ok, err := db.Has(context.Background(), "ns", capPacket(0).Model.Fingerprint(), id)
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

func use(t *testing.T, db *DB, id format.PacketID) {
	t.Helper()
	v, err := db.Get(context.Background(), "ns", capPacket(0).Model.Fingerprint(), id)
	if err != nil {
		t.Fatal(err)
	}
	v.Release()
	time.Sleep(time.Millisecond) // distinct timestamps
}

func TestEvictLRU(t *testing.T) {
	fs := vfs.NewMem()
	db := openMem(t, fs, capOptions(fs, 3, EvictLRU))
	defer db.Close()
	events, cancel := db.Subscribe(16)
	defer cancel()
	a, b, c := putCap(t, db, 1), putCap(t, db, 2), putCap(t, db, 3)
	use(t, db, a) // b is now the least recently used
	d := putCap(t, db, 4)
	if present(t, db, b) || !present(t, db, a) || !present(t, db, c) || !present(t, db, d) {
		t.Fatalf("LRU evicted the wrong packet")
	}
	s := db.Stats()
	if s.Evictions != 1 || s.EvictedBytes != capExtent || s.LiveBytes != 3*capExtent {
		t.Fatalf("stats: evictions %d, bytes %d, live %d", s.Evictions, s.EvictedBytes, s.LiveBytes)
	}
	var evicted []format.PacketID
	for len(events) > 0 {
		if ev := <-events; ev.Kind == EventEvicted {
			evicted = append(evicted, ev.ID)
		}
	}
	if len(evicted) != 1 || evicted[0] != b {
		t.Fatalf("evicted events %v, want %s", evicted, b.Short())
	}
	wantClean(t, db, "after eviction")
}

func TestEvictLFU(t *testing.T) {
	fs := vfs.NewMem()
	db := openMem(t, fs, capOptions(fs, 3, EvictLFU))
	defer db.Close()
	a, b, c := putCap(t, db, 1), putCap(t, db, 2), putCap(t, db, 3)
	use(t, db, a)
	use(t, db, a)
	use(t, db, c)
	use(t, db, b)
	use(t, db, c) // uses: a 2, b 1, c 2: b goes although used recently
	putCap(t, db, 4)
	if present(t, db, b) || !present(t, db, a) || !present(t, db, c) {
		t.Fatal("LFU evicted the wrong packet")
	}
}

func TestEvictPinsAndNoSpace(t *testing.T) {
	fs := vfs.NewMem()
	db := openMem(t, fs, capOptions(fs, 3, EvictLRU))
	fp := capPacket(0).Model.Fingerprint()
	ids := []format.PacketID{putCap(t, db, 1), putCap(t, db, 2), putCap(t, db, 3)}
	for _, id := range ids[:2] {
		if err := db.Pin("ns", fp, id); err != nil {
			t.Fatal(err)
		}
	}
	putCap(t, db, 4) // evicts the only unpinned one
	if present(t, db, ids[2]) || !present(t, db, ids[0]) || !present(t, db, ids[1]) {
		t.Fatal("a pinned packet was evicted")
	}
	if s := db.Stats(); s.PinnedPackets != 2 {
		t.Fatalf("pinned %d", s.PinnedPackets)
	}
	db.Close()

	// Pins are durable.
	db = openMem(t, fs, capOptions(fs, 2, EvictLRU))
	defer db.Close()
	if ok, err := db.Pinned("ns", fp, ids[0]); err != nil || !ok {
		t.Fatalf("pin lost at reopen: %v %v", ok, err)
	}
	if _, err := db.Pinned("ns", format.Fingerprint{1}, ids[0]); !errors.Is(err, ErrModelMismatch) {
		t.Fatalf("Pinned for another model: %v, want ErrModelMismatch", err)
	}
	if ok, err := db.Pinned("ns", fp, format.PacketID{7}); err != nil || ok {
		t.Fatalf("Pinned of a packet not stored: %v %v, want false, nil", ok, err)
	}
	if _, err := db.Put(context.Background(), capPacket(5)); !errors.Is(err, ErrNoSpace) {
		t.Fatalf("Put with only pinned packets left: %v", err)
	}
	if s := db.Stats(); s.Evictions != 0 || s.Packets != 3 {
		t.Fatalf("a failed Put evicted: %+v", s.OpsStats)
	}
	if err := db.Unpin("ns", fp, ids[0]); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Put(context.Background(), capPacket(5)); err != nil {
		t.Fatalf("Put after Unpin: %v", err)
	}
	if present(t, db, ids[0]) || !present(t, db, ids[1]) {
		t.Fatal("Unpin did not make the packet evictable")
	}
	if err := db.Pin("ns", fp, format.PacketID{1}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("pin of an absent packet: %v", err)
	}
	if err := db.Pin("ns", format.Fingerprint{1}, ids[1]); !errors.Is(err, ErrModelMismatch) {
		t.Fatalf("pin for another model: %v", err)
	}
	// A packet larger than the cap fails, and evicts nothing.
	big := randPacket(testSpec(format.DTypeBF16, 2, 2, 8), "ns", 1000, 9)
	if _, err := db.Put(context.Background(), big); !errors.Is(err, ErrNoSpace) {
		t.Fatalf("Put larger than MaxBytes: %v", err)
	}
	wantClean(t, db, "after capacity")
}

// TestAccessStatsSurviveReopen: statistics saved at Close order eviction
// after a reopen.
func TestAccessStatsSurviveReopen(t *testing.T) {
	fs := vfs.NewMem()
	db := openMem(t, fs, capOptions(fs, 3, EvictLFU))
	a, b, c := putCap(t, db, 1), putCap(t, db, 2), putCap(t, db, 3)
	for range 3 {
		use(t, db, a)
		use(t, db, b)
	}
	use(t, db, c)
	db.Close()
	db = openMem(t, fs, capOptions(fs, 3, EvictLFU))
	defer db.Close()
	use(t, db, c) // c: 2 uses in all, still the least
	putCap(t, db, 4)
	if present(t, db, c) || !present(t, db, a) || !present(t, db, b) {
		t.Fatal("eviction after reopen ignored the saved statistics")
	}
	wantClean(t, db, "after reopen and eviction")
}

func TestCapacityOptionsValidate(t *testing.T) {
	for _, o := range []Options{{MaxBytes: -1}, {Eviction: 7}, {CompactLiveRatio: 2}, {CompactLiveRatio: -0.5}} {
		if err := o.Validate(); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("%+v: %v", o, err)
		}
	}
}

// TestEvictConcurrent runs readers against a writer that keeps evicting,
// with access statistics flushed on every write (run under -race): reads
// return exact bytes or ErrNotFound, and the store stays within MaxBytes
// and consistent.
func TestEvictConcurrent(t *testing.T) {
	fs := vfs.NewMem()
	o := capOptions(fs, 4, EvictLRU)
	o.AccessFlushInterval = time.Nanosecond
	db := openMem(t, fs, o)
	defer db.Close()
	fp := capPacket(0).Model.Fingerprint()
	byID := map[format.PacketID]*Packet{}
	for i := range 12 {
		p := capPacket(uint64(i))
		byID[format.ComputePacketID("ns", fp, "", p.TokenIDs)] = p
	}
	done := make(chan struct{})
	errs := make(chan error, 4)
	for range 2 {
		go func() {
			for {
				select {
				case <-done:
					errs <- nil
					return
				default:
				}
				if err := readAll(db, fp, byID); err != nil && !errors.Is(err, ErrNotFound) {
					errs <- err
					return
				}
			}
		}()
	}
	for i := range 12 {
		if _, err := db.Put(context.Background(), capPacket(uint64(i))); err != nil {
			t.Fatal(err)
		}
		if s := db.Stats(); s.LiveBytes > uint64(o.MaxBytes) {
			t.Fatalf("live %d over MaxBytes %d", s.LiveBytes, o.MaxBytes)
		}
	}
	close(done)
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if s := db.Stats(); s.Evictions != 8 || s.Packets != 4 {
		t.Fatalf("evictions %d, packets %d", s.Evictions, s.Packets)
	}
	wantClean(t, db, "after concurrent eviction")
}

// TestEvictSizesEncodedExtent: room is made for the extent as it will be
// stored. Two 16 KiB packets and an int4 packet of the same shape (an
// 8 KiB extent) fit under 40 KiB: nothing is evicted, as it would be if
// the int4 packet were sized by its raw bytes.
func TestEvictSizesEncodedExtent(t *testing.T) {
	fs := vfs.NewMem()
	o := capOptions(fs, 2, EvictLRU)
	o.MaxBytes += 8 << 10
	db := openMem(t, fs, o)
	defer db.Close()
	a, b := putCap(t, db, 1), putCap(t, db, 2)
	p := smoothPacket(capPacket(0).Model, "ns", 100, 0, 0, 3, format.CodecInt4)
	d, err := db.Put(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	v, err := db.Get(context.Background(), "ns", p.Model.Fingerprint(), d)
	if err != nil {
		t.Fatal(err)
	}
	ext := v.Header().ExtentLength
	v.Release()
	if ext != 8<<10 {
		t.Fatalf("int4 extent of %d bytes, the test expects 8 KiB", ext)
	}
	s := db.Stats()
	if s.Evictions != 0 || !present(t, db, a) || !present(t, db, b) {
		t.Fatalf("evictions %d (a present %v, b %v): the int4 packet was sized by its raw bytes",
			s.Evictions, present(t, db, a), present(t, db, b))
	}
	if s.LiveBytes != 2*capExtent+8<<10 || s.LiveBytes > uint64(o.MaxBytes) {
		t.Fatalf("live %d bytes, max %d", s.LiveBytes, o.MaxBytes)
	}
	wantClean(t, db, "after an encoded put")
}
