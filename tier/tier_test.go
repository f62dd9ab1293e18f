package tier

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/kvstore/kvstore/store"
)

// TestConditionalCreate412 checks, on the real server, that a second
// create of one key is refused with HTTP 412 and leaves the first bytes:
// with the SDK directly (the status code itself) and through putIfAbsent.
func TestConditionalCreate412(t *testing.T) {
	e := newEnv(t, Options{})
	ctx := ctxT(t)
	raw := e.srv.Client()
	put := func(key, body string) error {
		_, err := raw.PutObject(ctx, &s3.PutObjectInput{Bucket: &e.bucket, Key: aws.String(key),
			Body: bytes.NewReader([]byte(body)), IfNoneMatch: aws.String("*")})
		return err
	}
	if err := put("k/one", "first"); err != nil {
		t.Fatal(err)
	}
	err := put("k/one", "second")
	var re *awshttp.ResponseError
	if !errors.As(err, &re) || re.HTTPStatusCode() != http.StatusPreconditionFailed {
		t.Fatalf("second conditional PUT: %v, want HTTP 412", err)
	}
	if err := e.tier.putIfAbsent(ctx, "", "k/one", []byte("third")); !errors.Is(err, errExists) {
		t.Fatalf("putIfAbsent over an existing key: %v, want errExists", err)
	}
	got, err := e.tier.getSmall(ctx, "", "k/one", 100, func([]byte) error { return nil })
	if err != nil || string(got) != "first" {
		t.Fatalf("object after refused writes: %q, %v; want \"first\"", got, err)
	}
}

func TestPushFetch(t *testing.T) {
	e := newEnv(t, Options{PartSize: 4 << 10, Parallel: 4})
	ctx := ctxT(t)
	p := testPacket("ns", testSpec(), 100, 1) // 51200 bytes: 13 parts, the last partial
	p.AdapterID, p.BasePosition = "lora", 5
	id, how, err := e.tier.Push(ctx, p)
	if err != nil || how != Created || id != packetID(p) {
		t.Fatalf("push: %v, %v, %v", id.Short(), how, err)
	}
	got, err := e.tier.Fetch(ctx, "ns", p.Model.Fingerprint(), id)
	if err != nil {
		t.Fatal(err)
	}
	samePacket(t, got, p)
	if _, how, err := e.tier.Push(ctx, p); err != nil || how != Present {
		t.Fatalf("second push: %v, %v; want Present", how, err)
	}
	ids, err := e.tier.List(ctx, "ns", p.Model.Fingerprint(), 0)
	if err != nil || len(ids) != 1 || ids[0] != id {
		t.Fatalf("list: %v, %v", ids, err)
	}
	if _, err := e.tier.Fetch(ctx, "ns", p.Model.Fingerprint(), packetID(testPacket("ns", testSpec(), 3, 2))); !errors.Is(err, ErrNotFound) || !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("fetch of an absent packet: %v, want ErrNotFound", err)
	}
}

// TestConcurrentPush: writers of one packet id at once, some with the same
// bytes and some with other bytes (a nondeterministic prefill), converge
// on one header whose parts are whole, and the losers' other-content parts
// are removed.
func TestConcurrentPush(t *testing.T) {
	e := newEnv(t, Options{PartSize: 4 << 10})
	ctx := ctxT(t)
	a := testPacket("ns", testSpec(), 40, 3)
	b := testPacket("ns", testSpec(), 40, 3)
	for l := range b.Layers {
		b.Layers[l].K[0] ^= 1 // same id, other bytes
	}
	const writers = 6
	var wg sync.WaitGroup
	res := make([]Pushed, writers)
	errs := make([]error, writers)
	for i := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := a
			if i%2 == 1 {
				p = b
			}
			_, res[i], errs[i] = e.open(t, Options{PartSize: 4 << 10}).Push(ctx, p)
		}()
	}
	wg.Wait()
	created := 0
	for i := range writers {
		if errs[i] != nil {
			t.Fatalf("writer %d: %v", i, errs[i])
		}
		if res[i] == Created {
			created++
		}
	}
	if created != 1 {
		t.Fatalf("%d writers created the header, want 1", created)
	}
	got, err := e.tier.Fetch(ctx, "ns", a.Model.Fingerprint(), packetID(a))
	if err != nil {
		t.Fatal(err)
	}
	winner := a
	if got.Layers[0].K[0] != a.Layers[0].K[0] {
		winner = b
	}
	samePacket(t, got, winner)
	// Only the winner's content remains under the id.
	out, err := e.srv.Client().ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: &e.bucket})
	if err != nil {
		t.Fatal(err)
	}
	h, _ := e.tier.Header(ctx, "ns", a.Model.Fingerprint(), packetID(a))
	if want := h.Parts() + 1; len(out.Contents) != want {
		t.Fatalf("%d objects in the bucket, want %d (one header, its parts)", len(out.Contents), want)
	}
}

// TestCacheTwoStores: two local stores share one tier. A packet Put
// through A's cache is served by B's cache byte for byte, fetched once and
// then local; B's Assemble of packets only A stored equals A's.
func TestCacheTwoStores(t *testing.T) {
	e := newEnv(t, Options{PartSize: 4 << 10})
	ctx := ctxT(t)
	a := &Cache{DB: openDB(t, nil), Tier: e.tier}
	b := &Cache{DB: openDB(t, nil), Tier: e.open(t, Options{PartSize: 4 << 10})}
	m := testSpec()
	var items []store.AssembleItem
	var pks []*store.Packet
	off := int64(0)
	for i := range 3 {
		p := testPacket("ns", m, 20+i*7, uint64(10+i))
		id, err := a.Put(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		items = append(items, store.AssembleItem{ID: id, Offset: off})
		off += int64(p.Tokens())
		pks = append(pks, p)
	}
	v, err := b.Get(ctx, "ns", m.Fingerprint(), items[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	sameView(t, v, pks[0])
	v.Release()
	if ok, err := b.DB.Has(context.Background(), "ns", m.Fingerprint(), items[0].ID); !ok || err != nil {
		t.Fatalf("B's store after a cache Get: has %v, %v", ok, err)
	}
	da, db := store.NewContiguousDest(m, int(off)), store.NewContiguousDest(m, int(off))
	if err := a.DB.Assemble(context.Background(), "ns", m.Fingerprint(), items, da, nil); err != nil {
		t.Fatal(err)
	}
	if err := b.Assemble(ctx, "ns", m.Fingerprint(), items, db, nil); err != nil {
		t.Fatal(err)
	}
	for l := range m.Layers {
		if !bytes.Equal(da.K[l], db.K[l]) || !bytes.Equal(da.V[l], db.V[l]) {
			t.Fatalf("layer %d: B's assembly from the tier differs from A's from its disk", l)
		}
	}
}

// TestFetchDamagedObjects: objects damaged in the bucket itself (not in
// transit) are ErrCorruption, never a packet: a part removed, a part
// overwritten with other bytes of the same length, and a valid header
// copied under another packet's key.
func TestFetchDamagedObjects(t *testing.T) {
	e := newEnv(t, Options{PartSize: 4 << 10, Attempts: 2})
	ctx := ctxT(t)
	raw := e.srv.Client()
	m := testSpec()
	p, q := testPacket("ns", m, 30, 81), testPacket("ns", m, 30, 82)
	for _, pk := range []*store.Packet{p, q} {
		if _, _, err := e.tier.Push(ctx, pk); err != nil {
			t.Fatal(err)
		}
	}
	h, err := e.tier.Header(ctx, "ns", m.Fingerprint(), packetID(p))
	if err != nil {
		t.Fatal(err)
	}
	// q's header bytes under p's key: a valid object in the wrong place.
	hq, err := e.tier.getSmall(ctx, "ns", e.tier.headerKey("ns", m.Fingerprint(), packetID(q)), MaxHeaderBytes, func([]byte) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	put := func(key string, b []byte) {
		if _, err := raw.PutObject(ctx, &s3.PutObjectInput{Bucket: &e.bucket, Key: aws.String(key), Body: bytes.NewReader(b)}); err != nil {
			t.Fatal(err)
		}
	}
	part1 := e.tier.partKey("ns", m.Fingerprint(), packetID(p), h.Content, 1)
	put(part1, make([]byte, h.PartSize)) // zeros instead of the part
	if _, err := e.tier.Fetch(ctx, "ns", m.Fingerprint(), packetID(p)); !errors.Is(err, ErrCorruption) {
		t.Fatalf("overwritten part: %v, want ErrCorruption", err)
	}
	if _, err := raw.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &e.bucket, Key: &part1}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.tier.Fetch(ctx, "ns", m.Fingerprint(), packetID(p)); !errors.Is(err, ErrCorruption) || errors.Is(err, ErrNotFound) {
		t.Fatalf("missing part: %v, want ErrCorruption (not ErrNotFound)", err)
	}
	put(e.tier.headerKey("ns", m.Fingerprint(), packetID(p)), hq)
	if _, err := e.tier.Fetch(ctx, "ns", m.Fingerprint(), packetID(p)); !errors.Is(err, ErrCorruption) {
		t.Fatalf("another packet's header: %v, want ErrCorruption", err)
	}
}
