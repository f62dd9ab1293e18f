package tier

import (
	"context"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvstore/kvstore/store"
)

// fault is what the proxy does to the requests it forwards.
type fault int

const (
	pass      fault = iota
	status500       // answer 500 without forwarding
	status503       // answer 503 (SlowDown) without forwarding
	truncate        // forward, then cut GET bodies to half
	flip            // forward, then flip one bit of GET bodies
	slow            // wait 3 s before forwarding
)

// proxy is a reverse proxy in front of the real server that injects one
// fault at a time, optionally only for the first `times` requests, and
// records every request's path and query.
type proxy struct {
	srv   *httptest.Server
	mode  atomic.Int32
	times atomic.Int32 // > 0: fault this many requests, then pass
	parts atomic.Bool  // fault only part objects, not headers or listings
	mu    sync.Mutex
	log   []string
}

func newProxy(t testing.TB, target string) *proxy {
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.ErrorLog = log.New(io.Discard, "", 0)
	rp.ModifyResponse = func(resp *http.Response) error {
		if resp.Request.Method != http.MethodGet || resp.StatusCode != http.StatusOK || !p.take(resp.Request) {
			return nil
		}
		switch fault(p.mode.Load()) {
		case truncate:
			resp.Body = struct {
				io.Reader
				io.Closer
			}{io.LimitReader(resp.Body, resp.ContentLength/2), resp.Body}
		case flip:
			resp.Body = &flipper{rc: resp.Body, at: resp.ContentLength / 3}
		}
		return nil
	}
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		p.log = append(p.log, r.Method+" "+r.URL.Path+"?"+r.URL.RawQuery)
		p.mu.Unlock()
		switch fault(p.mode.Load()) {
		case status500, status503:
			if p.take(r) {
				io.Copy(io.Discard, r.Body)
				code := http.StatusInternalServerError
				if fault(p.mode.Load()) == status503 {
					code = http.StatusServiceUnavailable
				}
				http.Error(w, "<Error><Code>InternalError</Code></Error>", code)
				return
			}
		case slow:
			if p.take(r) {
				select {
				case <-time.After(3 * time.Second):
				case <-r.Context().Done():
					return
				}
			}
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(p.srv.Close)
	return p
}

// take reports whether request r gets the fault.
func (p *proxy) take(r *http.Request) bool {
	if p.parts.Load() && (strings.HasSuffix(r.URL.Path, "/header") || strings.Contains(r.URL.RawQuery, "list-type")) {
		return false
	}
	for {
		n := p.times.Load()
		if n == 0 {
			return true // unlimited
		}
		if n < 0 {
			return false
		}
		next := n - 1
		if next == 0 {
			next = -1
		}
		if p.times.CompareAndSwap(n, next) {
			return true
		}
	}
}

func (p *proxy) set(f fault, times int32) { p.mode.Store(int32(f)); p.times.Store(times) }

func (p *proxy) requests() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.log...)
}

// flipper flips bit 0 of the byte at offset at.
type flipper struct {
	rc  io.ReadCloser
	at  int64
	off int64
}

func (f *flipper) Read(b []byte) (int, error) {
	n, err := f.rc.Read(b)
	if f.at >= f.off && f.at < f.off+int64(n) {
		b[f.at-f.off] ^= 1
	}
	f.off += int64(n)
	return n, err
}

func (f *flipper) Close() error { return f.rc.Close() }

// TestFaults puts a packet in the tier, then asks a cache whose tier is
// behind a faulty proxy for it: every fault that persists is a clear error
// wrapping the expected sentinel, within a bounded time; nothing is kept
// locally; the packet the store already had is still served; a fault that
// passes (the first attempt only) is retried and the right bytes arrive.
func TestFaults(t *testing.T) {
	e := newEnv(t, Options{PartSize: 4 << 10})
	ctx := ctxT(t)
	px := newProxy(t, e.srv.Endpoint)
	m := testSpec()
	remote := testPacket("ns", m, 30, 21)
	if _, _, err := e.tier.Push(ctx, remote); err != nil {
		t.Fatal(err)
	}
	local := testPacket("ns", m, 10, 22)
	faulty := e.open(t, Options{Endpoint: px.srv.URL, PartSize: 4 << 10, Attempts: 3,
		RequestTimeout: 500 * time.Millisecond, Backoff: 10 * time.Millisecond})
	c := &Cache{DB: openDB(t, nil), Tier: faulty}
	if _, err := c.DB.Put(context.Background(), local); err != nil {
		t.Fatal(err)
	}
	const bound = 5 * time.Second // 3 attempts x 0.5 s, backoff, a loaded machine
	for _, tc := range []struct {
		name  string
		f     fault
		want  error
		parts bool
	}{
		{"500", status500, ErrUnavailable, false},
		{"503", status503, ErrUnavailable, false},
		{"truncated body", truncate, ErrCorruption, false},
		{"flipped byte", flip, ErrCorruption, false},
		{"slow", slow, ErrUnavailable, false},
		{"parts 503", status503, ErrUnavailable, true},
		{"parts truncated", truncate, ErrCorruption, true},
		{"parts flipped", flip, ErrCorruption, true},
		{"parts slow", slow, ErrUnavailable, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			px.set(tc.f, 0)
			px.parts.Store(tc.parts)
			defer px.set(pass, 0)
			start := time.Now()
			v, err := c.Get(ctx, "ns", m.Fingerprint(), packetID(remote))
			took := time.Since(start)
			if err == nil {
				v.Release()
				t.Fatal("Get succeeded through a persistent fault")
			}
			t.Logf("%v after %v", err, took)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Get: %v, want %v", err, tc.want)
			}
			if took > bound {
				t.Fatalf("Get took %v, bound %v", took, bound)
			}
			if ok, _ := c.DB.Has(context.Background(), "ns", m.Fingerprint(), packetID(remote)); ok {
				t.Fatal("a packet that failed its fetch was stored locally")
			}
			v, err = c.Get(ctx, "ns", m.Fingerprint(), packetID(local))
			if err != nil {
				t.Fatalf("local packet during the fault: %v", err)
			}
			sameView(t, v, local)
			v.Release()
		})
	}
	// Transient faults: the first two faulted requests only.
	for _, f := range []fault{status503, truncate, flip} {
		px.set(f, 2)
		px.parts.Store(f != status503)
		got, err := faulty.Fetch(ctx, "ns", m.Fingerprint(), packetID(remote))
		if err != nil {
			t.Fatalf("fault %d on two requests: %v, want a retried success", f, err)
		}
		samePacket(t, got, remote)
	}
	px.set(pass, 0)
	px.parts.Store(false)
	v, err := c.Get(ctx, "ns", m.Fingerprint(), packetID(remote))
	if err != nil {
		t.Fatal(err)
	}
	sameView(t, v, remote)
	v.Release()

	// The tier down: the real server stopped, then nothing listening.
	e.srv.Stop()
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	dead := "http://" + l.Addr().String()
	l.Close()
	for _, ep := range []string{px.srv.URL, dead} {
		down := &Cache{DB: c.DB, Tier: e.open(t, Options{Endpoint: ep, Attempts: 2, RequestTimeout: 500 * time.Millisecond, Backoff: time.Millisecond})}
		start := time.Now()
		_, err := down.Get(ctx, "ns", m.Fingerprint(), packetID(testPacket("ns", m, 5, 23)))
		if !errors.Is(err, ErrUnavailable) || time.Since(start) > bound {
			t.Fatalf("tier down (%s): %v after %v, want ErrUnavailable within %v", ep, err, time.Since(start), bound)
		}
		if _, err := down.Put(ctx, testPacket("ns", m, 5, 24)); !errors.Is(err, ErrUnavailable) {
			t.Fatalf("put with the tier down: %v, want ErrUnavailable", err)
		}
		for _, p := range []*store.Packet{local, remote} {
			v, err := down.Get(ctx, "ns", m.Fingerprint(), packetID(p))
			if err != nil {
				t.Fatalf("tier down: local packet: %v", err)
			}
			sameView(t, v, p)
			v.Release()
		}
	}
}

// TestNamespaceIsolation: every request made for a namespace names a key
// or a listing under that namespace's prefix only, and one namespace
// neither lists nor reads another's packets, even knowing the id.
func TestNamespaceIsolation(t *testing.T) {
	e := newEnv(t, Options{PartSize: 4 << 10})
	ctx := ctxT(t)
	px := newProxy(t, e.srv.Endpoint)
	tr := e.open(t, Options{Endpoint: px.srv.URL, PartSize: 4 << 10, Prefix: "kv"})
	m := testSpec()
	a, b := testPacket("tenant-a", m, 12, 31), testPacket("tenant-b", m, 12, 31) // same tokens
	for _, p := range []*store.Packet{a, b} {
		if _, _, err := tr.Push(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	before := len(px.requests())
	ids, err := tr.List(ctx, "tenant-a", m.Fingerprint(), 0)
	if err != nil || len(ids) != 1 || ids[0] != packetID(a) {
		t.Fatalf("tenant-a lists %v (%v), want only its own packet", ids, err)
	}
	if _, err := tr.Fetch(ctx, "tenant-a", m.Fingerprint(), packetID(a)); err != nil {
		t.Fatal(err)
	}
	// tenant-a asking for tenant-b's id finds nothing: the id is looked up
	// under tenant-a's prefix.
	if _, err := tr.Fetch(ctx, "tenant-a", m.Fingerprint(), packetID(b)); !errors.Is(err, ErrNotFound) {
		t.Fatalf("tenant-a fetching tenant-b's id: %v, want ErrNotFound", err)
	}
	prefA, prefB := "/"+e.bucket+"/"+tr.nsPrefix("tenant-a"), tr.nsPrefix("tenant-b")
	for _, r := range px.requests()[before:] {
		path, query, _ := strings.Cut(strings.TrimPrefix(r, "GET "), "?")
		listA := path == "/"+e.bucket && strings.Contains(query, "prefix="+url.QueryEscape(tr.nsPrefix("tenant-a")))
		if !strings.HasPrefix(path, prefA) && !listA || strings.Contains(r, prefB) {
			t.Errorf("request for tenant-a outside its prefix %s: %s", prefA, r)
		}
	}
	if !strings.HasPrefix(tr.nsPrefix("tenant-a"), "kv/") || len(nsHash("x")) != 32 {
		t.Fatalf("prefix %q", tr.nsPrefix("tenant-a"))
	}
}

// TestNamespaceCredentials: a namespace with its own credentials signs
// with them, and only its requests do: wrong keys for tenant-b (an unknown
// access key, or the right one with a wrong secret) fail tenant-b's
// requests at once (not retried, not mistaken for a missing packet) while
// tenant-a's, signed with the default keys, succeed.
func TestNamespaceCredentials(t *testing.T) {
	e := newEnv(t, Options{PartSize: 4 << 10})
	ctx := ctxT(t)
	m := testSpec()
	for i, wrong := range []Credentials{
		{AccessKey: "someone-else", SecretKey: "not-the-secret"},
		{AccessKey: e.srv.AccessKey, SecretKey: "not-the-secret"},
	} {
		tr := e.open(t, Options{PartSize: 4 << 10, Attempts: 3,
			NamespaceCredentials: map[string]Credentials{"tenant-b": wrong}})
		if _, _, err := tr.Push(ctx, testPacket("tenant-a", m, 8, uint64(71+i))); err != nil {
			t.Fatalf("tenant-a with the default keys: %v", err)
		}
		_, _, err := tr.Push(ctx, testPacket("tenant-b", m, 8, 73))
		if !errors.Is(err, ErrUnavailable) || errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "attempt 1 of 3") {
			t.Fatalf("tenant-b with wrong keys %d: %v, want ErrUnavailable on the first attempt", i, err)
		}
		_, err = tr.Fetch(ctx, "tenant-b", m.Fingerprint(), packetID(testPacket("tenant-b", m, 8, 73)))
		if !errors.Is(err, ErrUnavailable) || errors.Is(err, ErrNotFound) {
			t.Fatalf("tenant-b fetch with wrong keys %d: %v, want ErrUnavailable", i, err)
		}
	}
}
