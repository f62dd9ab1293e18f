package tier

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/internal/s3test"
	"github.com/kvstore/kvstore/internal/testenv"
	"github.com/kvstore/kvstore/store"
)

// The long form's sizes: packets pushed before the first kill, readers
// fetching while a volume server is killed, packets pushed while it is
// down, and the part size (64 KiB, so every part is a volume-server
// needle, not an entry inlined in the filer's metadata).
const (
	longPackets  = 40
	longReaders  = 4
	longDownPush = 6
	longPartSize = 64 << 10
)

// TestLongSeaweed runs the tier over a SeaweedFS cluster (a master with
// replication 001, two volume servers, a filer with its S3 gateway) and
// kills a volume server with SIGKILL, twice: first volume server 1, then,
// after it is back, volume server 0, so the second round also proves that
// the restarted server kept its copy.
//
// Each round: fetches run on longReaders goroutines while the server is
// killed, and each returns the exact bytes or a sentinel error; then every
// packet pushed with both servers up is fetched byte for byte from the
// survivor; pushes with the server down either succeed (and fetch byte for
// byte) or fail with a sentinel and leave no header object, and a packet
// whose push failed is never fetched as bytes; then the server restarts,
// everything is fetched again, and the failed pushes are repeated until
// they succeed.
func TestLongSeaweed(t *testing.T) {
	testenv.LongRun(t, "the SeaweedFS long form of the tier (minutes)")
	sw := s3test.StartSeaweed(t)
	const bucket = "kvstore-long"
	sw.CreateBucket(t, bucket)
	tr, err := New(Options{Endpoint: sw.Endpoint, Bucket: bucket,
		Credentials: Credentials{AccessKey: sw.AccessKey, SecretKey: sw.SecretKey},
		PartSize:    longPartSize, Attempts: 5, RequestTimeout: 10 * time.Second, Backoff: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancel()
	l := &longForm{t: t, ctx: ctx, tr: tr, sw: sw, bucket: bucket, m: testSpec(),
		whole: map[format.PacketID]*store.Packet{}, replicated: map[format.PacketID]bool{}}

	start := time.Now()
	var payload int64
	for i := range longPackets {
		p := l.packet(uint64(1000 + i))
		if _, how, err := tr.Push(ctx, p); err != nil || how != Created {
			t.Fatalf("push %d with both volume servers up: %v, %v", i, how, err)
		}
		l.keep(p, true)
		payload += int64(2 * len(p.Layers) * len(p.Layers[0].K))
	}
	t.Logf("pushed %d packets (%d payload bytes, %d-byte parts) in %v", longPackets, payload, longPartSize, time.Since(start))
	// Replication 001 is the premise: each volume server holds a copy.
	for i, v := range sw.Volumes {
		if n := v.DataBytes(); n < payload {
			t.Fatalf("volume server %d holds %d bytes of volume files, less than the %d payload bytes pushed: replication 001 not in effect", i, n, payload)
		}
	}
	l.fetchAll("with both volume servers up", l.all())

	for round, victim := range []int{1, 0} {
		l.round = round + 1
		l.killMidRead(victim)
		sw.WaitVolumeServers(t, 1)
		l.fetchAll(fmt.Sprintf("round %d, volume server %d down", l.round, victim), l.mustSurvive())
		failed := l.pushWhileDown(uint64(5000 + 100*round))
		l.listWhileDown(failed)
		start := time.Now()
		sw.Volumes[victim].Restart(t)
		sw.WaitVolumeServers(t, 2)
		l.fetchAll(fmt.Sprintf("round %d, after the restart of volume server %d", l.round, victim), l.all())
		l.repush(failed)
		t.Logf("round %d: volume server %d restarted, %d packets fetched byte for byte, %d failed pushes repeated, in %v",
			l.round, victim, len(l.whole), len(failed), time.Since(start))
	}
	t.Logf("long form: %d packets, 2 SIGKILLs, %d fetches in all, %d exact, 0 wrong", len(l.whole), l.fetches, l.exact)
}

// longForm is the state of TestLongSeaweed: the packets the tier holds
// whole (their bytes), and which of them were pushed with both volume
// servers up (so they must survive the loss of either).
type longForm struct {
	t          *testing.T
	ctx        context.Context
	tr         *Tier
	sw         *s3test.Seaweed
	bucket     string
	m          *format.ModelSpec
	round      int
	whole      map[format.PacketID]*store.Packet
	replicated map[format.PacketID]bool
	fetches    int64
	exact      int64
}

// packet returns the packet of seed: 100 to 399 tokens of 512 bytes, so
// 1 to 4 parts.
func (l *longForm) packet(seed uint64) *store.Packet {
	return testPacket("long", l.m, 100+int(seed*37%300), seed)
}

func (l *longForm) keep(p *store.Packet, replicated bool) {
	id := packetID(p)
	l.whole[id] = p
	if replicated {
		l.replicated[id] = true
	}
}

func (l *longForm) all() []format.PacketID {
	var ids []format.PacketID
	for id := range l.whole {
		ids = append(ids, id)
	}
	return ids
}

func (l *longForm) mustSurvive() []format.PacketID {
	var ids []format.PacketID
	for id := range l.whole {
		if l.replicated[id] {
			ids = append(ids, id)
		}
	}
	return ids
}

// fetchAll fetches ids and fails t unless each is the exact packet pushed.
func (l *longForm) fetchAll(when string, ids []format.PacketID) {
	l.t.Helper()
	start := time.Now()
	for _, id := range ids {
		want := l.whole[id]
		got, err := l.tr.Fetch(l.ctx, want.Namespace, l.m.Fingerprint(), id)
		l.fetches++
		if err != nil {
			l.t.Fatalf("%s: fetch %s: %v", when, id.Short(), err)
		}
		if d := packetDiff(got, want); d != "" {
			l.t.Fatalf("%s: fetch %s: wrong bytes: %s", when, id.Short(), d)
		}
		l.exact++
	}
	l.t.Logf("%s: %d packets fetched byte for byte in %v", when, len(ids), time.Since(start))
}

// outcomes counts what fetches returned.
type outcomes struct {
	exact, unavailable, corruption, notFound atomic.Int64
}

func (o *outcomes) total() int64 {
	return o.exact.Load() + o.unavailable.Load() + o.corruption.Load() + o.notFound.Load()
}

// killMidRead runs longReaders goroutines fetching every packet round
// robin, SIGKILLs volume server victim once fetches have completed and
// others are in flight, and keeps fetching until every packet has been
// fetched twice after the kill. Every fetch must return the exact bytes or
// a sentinel error; packets pushed while a server was down are among them
// (they may be lost with it, but never wrong).
func (l *longForm) killMidRead(victim int) {
	l.t.Helper()
	ids := l.all()
	var (
		before, after outcomes
		next          atomic.Int64
		inFlight      atomic.Int64
		killed        atomic.Bool
		stop          = make(chan struct{})
		wg            sync.WaitGroup
		mu            sync.Mutex
		bad           []string
	)
	for range longReaders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				id := ids[int(next.Add(1)-1)%len(ids)]
				want := l.whole[id]
				o := &before
				if killed.Load() {
					o = &after
				}
				inFlight.Add(1)
				got, err := l.tr.Fetch(l.ctx, want.Namespace, l.m.Fingerprint(), id)
				inFlight.Add(-1)
				if why := count(o, got, want, err); why != "" {
					mu.Lock()
					bad = append(bad, id.Short()+": "+why)
					mu.Unlock()
				}
			}
		}()
	}
	waitFor(func() bool { return before.total() >= 2*longReaders }, 2*time.Minute)
	flying := inFlight.Load()
	l.sw.Volumes[victim].Kill()
	killed.Store(true)
	killedAt := time.Now()
	ok := waitFor(func() bool { return after.total() >= int64(2*len(ids)) }, 5*time.Minute)
	close(stop)
	wg.Wait()
	n := before.total() + after.total()
	l.fetches += n
	l.exact += before.exact.Load() + after.exact.Load()
	l.t.Logf("round %d: SIGKILL of volume server %d with %d fetches in flight; before it %d fetches, %d exact; "+
		"after it %d fetches in %v: %d exact, %d ErrUnavailable, %d ErrCorruption, %d ErrNotFound",
		l.round, victim, flying, before.total(), before.exact.Load(), after.total(), time.Since(killedAt).Round(time.Millisecond),
		after.exact.Load(), after.unavailable.Load(), after.corruption.Load(), after.notFound.Load())
	for _, b := range bad {
		l.t.Errorf("round %d, fetch during the kill: %s", l.round, b)
	}
	if !ok {
		l.t.Fatalf("round %d: only %d fetches within 5 minutes of the kill", l.round, after.total())
	}
	if before.unavailable.Load()+before.corruption.Load()+before.notFound.Load() > 0 {
		l.t.Errorf("round %d: fetches failed before the kill: %d ErrUnavailable, %d ErrCorruption, %d ErrNotFound",
			l.round, before.unavailable.Load(), before.corruption.Load(), before.notFound.Load())
	}
	if l.t.Failed() {
		l.t.FailNow()
	}
}

// count records one fetch's outcome in o and returns why it is wrong ("" if
// it is the exact packet or a sentinel error).
func count(o *outcomes, got, want *store.Packet, err error) string {
	switch {
	case err == nil:
		if d := packetDiff(got, want); d != "" {
			return "wrong bytes: " + d
		}
		o.exact.Add(1)
	case errors.Is(err, ErrCorruption):
		o.corruption.Add(1)
	case errors.Is(err, ErrNotFound):
		o.notFound.Add(1)
	case errors.Is(err, ErrUnavailable):
		o.unavailable.Add(1)
	default:
		return "error wrapping no sentinel: " + err.Error()
	}
	return ""
}

// pushWhileDown pushes longDownPush new packets with one volume server
// down. A push that succeeds must fetch byte for byte; one that fails must
// wrap a sentinel and leave no header object (and so no packet). It
// returns the packets whose push failed.
func (l *longForm) pushWhileDown(seed uint64) []*store.Packet {
	l.t.Helper()
	var failed []*store.Packet
	var created int
	why := map[string]int{}
	start := time.Now()
	for i := range longDownPush {
		p := l.packet(seed + uint64(i))
		id, how, err := l.tr.Push(l.ctx, p)
		if err == nil {
			if how != Created {
				l.t.Fatalf("round %d: push %s while down: %v, want Created (a new packet)", l.round, id.Short(), how)
			}
			created++
			l.keep(p, false)
			l.fetchAll(fmt.Sprintf("round %d, pushed while down", l.round), []format.PacketID{id})
			continue
		}
		switch {
		case errors.Is(err, ErrUnavailable):
			why["ErrUnavailable"]++
		case errors.Is(err, ErrCorruption):
			why["ErrCorruption"]++
		case errors.Is(err, ErrNotFound):
			why["ErrNotFound"]++
		default:
			l.t.Fatalf("round %d: push %s while down: error wrapping no sentinel: %v", l.round, id.Short(), err)
		}
		if i == 0 {
			l.t.Logf("round %d: first failed push: %v", l.round, err)
		}
		l.noPacket(p)
		failed = append(failed, p)
	}
	l.t.Logf("round %d: %d pushes with a volume server down in %v: %d created (fetched byte for byte), %d failed %v, each leaving no header object",
		l.round, longDownPush, time.Since(start).Round(time.Millisecond), created, len(failed), why)
	return failed
}

// noPacket fails t unless p's header object is absent (a HEAD of its key,
// and Tier.Header, both not found) and a fetch of p returns no bytes.
func (l *longForm) noPacket(p *store.Packet) {
	l.t.Helper()
	fp, id := l.m.Fingerprint(), packetID(p)
	key := l.tr.headerKey(p.Namespace, fp, id)
	_, err := l.sw.Client().HeadObject(l.ctx, &s3.HeadObjectInput{Bucket: &l.bucket, Key: &key})
	if _, w := classify(err); !errors.Is(w, ErrNotFound) {
		l.t.Fatalf("round %d: failed push of %s: HEAD of its header object: %v, want not found", l.round, id.Short(), err)
	}
	if _, err := l.tr.Header(l.ctx, p.Namespace, fp, id); !errors.Is(err, ErrNotFound) {
		l.t.Fatalf("round %d: failed push of %s: Header: %v, want ErrNotFound", l.round, id.Short(), err)
	}
	got, err := l.tr.Fetch(l.ctx, p.Namespace, fp, id)
	if err == nil || !(errors.Is(err, ErrNotFound) || errors.Is(err, ErrCorruption)) {
		l.t.Fatalf("round %d: failed push of %s: Fetch returned %v, %v; want ErrNotFound or ErrCorruption", l.round, id.Short(), got != nil, err)
	}
}

// listWhileDown lists the namespace with the server down: every id listed
// is a whole packet or one whose push failed (its parts may be there
// without a header), and the latter fetch as no packet.
func (l *longForm) listWhileDown(failed []*store.Packet) {
	l.t.Helper()
	ids, err := l.tr.List(l.ctx, "long", l.m.Fingerprint(), 0)
	if err != nil {
		l.t.Fatalf("round %d: list while down: %v", l.round, err)
	}
	byID := map[format.PacketID]*store.Packet{}
	for _, p := range failed {
		byID[packetID(p)] = p
	}
	headless := 0
	for _, id := range ids {
		if l.whole[id] != nil {
			continue
		}
		p := byID[id]
		if p == nil {
			l.t.Fatalf("round %d: list while down names %s, which no push made", l.round, id.Short())
		}
		l.noPacket(p)
		headless++
	}
	l.t.Logf("round %d: list with a volume server down: %d ids, %d of them parts without a header (no packet)", l.round, len(ids), headless)
}

// repush repeats each failed push until it succeeds (the master makes the
// volumes writable again once the restarted server has reported them),
// then fetches it byte for byte.
func (l *longForm) repush(failed []*store.Packet) {
	l.t.Helper()
	for _, p := range failed {
		deadline := time.Now().Add(3 * time.Minute)
		tries := 0
		for {
			tries++
			_, _, err := l.tr.Push(l.ctx, p)
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				l.t.Fatalf("round %d: push after the restart still fails after %d tries: %v", l.round, tries, err)
			}
			time.Sleep(time.Second)
		}
		l.keep(p, true)
		l.fetchAll(fmt.Sprintf("round %d, pushed again after the restart (%d tries)", l.round, tries), []format.PacketID{packetID(p)})
	}
}

// waitFor polls cond every 10 ms until it holds (true) or d passes (false).
func waitFor(cond func() bool, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	return true
}

// packetDiff says how got differs from want ("" when it holds the same
// fields and tensors, byte for byte). Unlike samePacket it does not need
// the test's goroutine.
func packetDiff(got, want *store.Packet) string {
	switch {
	case got == nil:
		return "no packet"
	case got.Namespace != want.Namespace || got.Model.Fingerprint() != want.Model.Fingerprint() ||
		got.AdapterID != want.AdapterID || got.BasePosition != want.BasePosition || got.Codec != want.Codec ||
		got.HeaderTokens != want.HeaderTokens || got.TrailerTokens != want.TrailerTokens:
		return "fields differ"
	case len(got.TokenIDs) != len(want.TokenIDs) || len(got.Layers) != len(want.Layers):
		return fmt.Sprintf("%d tokens and %d layers, want %d and %d", len(got.TokenIDs), len(got.Layers), len(want.TokenIDs), len(want.Layers))
	}
	for i := range got.TokenIDs {
		if got.TokenIDs[i] != want.TokenIDs[i] {
			return fmt.Sprintf("token %d differs", i)
		}
	}
	for i := range got.Layers {
		if string(got.Layers[i].K) != string(want.Layers[i].K) || string(got.Layers[i].V) != string(want.Layers[i].V) {
			return fmt.Sprintf("layer %d differs", i)
		}
	}
	return ""
}
