package tier

import (
	"context"
	"testing"

	"github.com/kvstore/kvstore/store"
)

// TestPushStored: a packet only the local store holds is pushed from it
// and fetched by another store byte for byte.
func TestPushStored(t *testing.T) {
	e := newEnv(t, Options{PartSize: 4 << 10})
	ctx := ctxT(t)
	db := openDB(t, nil)
	p := testPacket("ns", testSpec(), 25, 51)
	id, err := db.Put(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	if how, err := e.tier.PushStored(ctx, db, "ns", p.Model.Fingerprint(), id); err != nil || how != Created {
		t.Fatalf("push stored: %v, %v", how, err)
	}
	other := &Cache{DB: openDB(t, nil), Tier: e.tier}
	v, err := other.Get(ctx, "ns", p.Model.Fingerprint(), id)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Release()
	sameView(t, v, p)
}

// TestEvictionKeepsACopy: with the tier down, asynchronous Puts into a
// store too small for them evict earlier packets locally; each evicted
// packet is still in the spool, and once the tier is back a Cache Get
// brings it back byte for byte. No packet is lost.
func TestEvictionKeepsACopy(t *testing.T) {
	e := newEnv(t, Options{PartSize: 4 << 10})
	ctx := ctxT(t)
	px := newProxy(t, e.srv.Endpoint)
	faulty := e.open(t, Options{Endpoint: px.srv.URL, PartSize: 4 << 10, Attempts: 1})
	q, err := OpenQueue(t.TempDir(), faulty)
	if err != nil {
		t.Fatal(err)
	}
	m := testSpec()
	// Each packet is 64 tokens x 512 bytes = 32 KiB; room for about two.
	c := &Cache{DB: openDB(t, &store.Options{MaxBytes: 80 << 10}), Tier: faulty, Queue: q}
	px.set(status503, 0)
	var pks []*store.Packet
	for i := range 5 {
		p := testPacket("ns", m, 64, uint64(60+i))
		if _, err := c.Put(ctx, p); err != nil {
			t.Fatalf("put %d: %v", i, err)
		}
		pks = append(pks, p)
	}
	evicted := 0
	for _, p := range pks {
		if ok, _ := c.DB.Has(context.Background(), "ns", m.Fingerprint(), packetID(p)); !ok {
			evicted++
		}
	}
	if evicted == 0 {
		t.Fatal("no packet was evicted: the test does not exercise eviction")
	}
	t.Logf("%d of %d packets evicted locally while the tier was down", evicted, len(pks))
	px.set(pass, 0)
	if left, err := q.Drain(ctx); left != 0 || err != nil {
		t.Fatalf("drain: %d left, %v", left, err)
	}
	for i, p := range pks {
		v, err := c.Get(ctx, "ns", m.Fingerprint(), packetID(p))
		if err != nil {
			t.Fatalf("packet %d after eviction: %v", i, err)
		}
		sameView(t, v, p)
		v.Release()
	}
	for _, p := range pks {
		if _, err := e.tier.Header(ctx, "ns", m.Fingerprint(), packetID(p)); err != nil {
			t.Fatalf("packet %s not in the tier: %v", packetID(p).Short(), err)
		}
	}
}
