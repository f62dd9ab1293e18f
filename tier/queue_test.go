package tier

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/kvstore/kvstore/store"
)

// TestQueueSurvivesRestart: with the tier failing, asynchronous Puts
// succeed locally and wait in the spool; the queue reopened (as after a
// crash, a torn temporary left behind) still holds them; once the tier is
// back, Drain pushes them byte for byte and empties the spool.
func TestQueueSurvivesRestart(t *testing.T) {
	e := newEnv(t, Options{PartSize: 4 << 10})
	ctx := ctxT(t)
	px := newProxy(t, e.srv.Endpoint)
	faulty := e.open(t, Options{Endpoint: px.srv.URL, PartSize: 4 << 10, Attempts: 2, Backoff: time.Millisecond})
	dir := filepath.Join(t.TempDir(), "queue")
	q, err := OpenQueue(dir, faulty)
	if err != nil {
		t.Fatal(err)
	}
	c := &Cache{DB: openDB(t, nil), Tier: faulty, Queue: q}
	m := testSpec()
	pks := []*store.Packet{testPacket("ns", m, 30, 41), testPacket("ns", m, 9, 42)}
	px.set(status503, 0)
	for _, p := range pks {
		if _, err := c.Put(ctx, p); err != nil {
			t.Fatalf("async put with the tier down: %v", err)
		}
		v, err := c.Get(ctx, "ns", m.Fingerprint(), packetID(p))
		if err != nil {
			t.Fatal(err)
		}
		sameView(t, v, p)
		v.Release()
	}
	if left, err := q.Drain(ctx); left != 2 || !errors.Is(err, ErrUnavailable) {
		t.Fatalf("drain with the tier down: %d left, %v; want 2, ErrUnavailable", left, err)
	}
	torn := filepath.Join(dir, "x"+spoolExt+".tmp123")
	if err := os.WriteFile(torn, []byte("half a spool file"), 0o644); err != nil {
		t.Fatal(err)
	}
	q, err = OpenQueue(dir, faulty) // the restart
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(torn); !os.IsNotExist(err) {
		t.Fatalf("torn temporary still there after OpenQueue: %v", err)
	}
	if names, err := q.Pending(); len(names) != 2 || err != nil {
		t.Fatalf("pending after restart: %v, %v", names, err)
	}
	px.set(pass, 0)
	if left, err := q.Drain(ctx); left != 0 || err != nil {
		t.Fatalf("drain with the tier back: %d left, %v", left, err)
	}
	for _, p := range pks {
		got, err := e.tier.Fetch(ctx, "ns", m.Fingerprint(), packetID(p))
		if err != nil {
			t.Fatal(err)
		}
		samePacket(t, got, p)
	}
	if names, _ := q.Pending(); len(names) != 0 {
		t.Fatalf("spool not empty after drain: %v", names)
	}
}

// TestQueueDamagedSpool: a spool file whose bytes changed on disk is
// ErrCorruption, is not pushed, and stays for an operator.
func TestQueueDamagedSpool(t *testing.T) {
	e := newEnv(t, Options{PartSize: 4 << 10})
	ctx := ctxT(t)
	q, err := OpenQueue(t.TempDir(), e.tier)
	if err != nil {
		t.Fatal(err)
	}
	p := testPacket("ns", testSpec(), 20, 43)
	if _, err := q.Add(p); err != nil {
		t.Fatal(err)
	}
	names, _ := q.Pending()
	b, err := os.ReadFile(names[0])
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)-100] ^= 4 // a payload byte
	if err := os.WriteFile(names[0], b, 0o644); err != nil {
		t.Fatal(err)
	}
	if left, err := q.Drain(ctx); left != 1 || !errors.Is(err, ErrCorruption) {
		t.Fatalf("drain of a damaged spool: %d left, %v; want 1, ErrCorruption", left, err)
	}
	if _, err := e.tier.Header(ctx, "ns", p.Model.Fingerprint(), packetID(p)); !errors.Is(err, ErrNotFound) {
		t.Fatalf("damaged packet reached the tier: %v", err)
	}
}

// TestQueueRun: Run pushes a packet soon after an asynchronous Put.
func TestQueueRun(t *testing.T) {
	e := newEnv(t, Options{PartSize: 4 << 10})
	q, err := OpenQueue(t.TempDir(), e.tier)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(ctxT(t))
	done := make(chan struct{})
	go func() { q.Run(ctx, time.Minute, func(err error) { t.Error(err) }); close(done) }()
	defer func() { cancel(); <-done }()
	c := &Cache{DB: openDB(t, nil), Tier: e.tier, Queue: q}
	p := testPacket("ns", testSpec(), 15, 44)
	if _, err := c.Put(ctx, p); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		got, err := e.tier.Fetch(ctx, "ns", p.Model.Fingerprint(), packetID(p))
		if err == nil {
			samePacket(t, got, p)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("packet not in the tier 20 s after an async put: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
