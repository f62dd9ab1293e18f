package admin_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store"
	"github.com/kvstore/kvstore/store/admin"
)

// testDB is a store with n one-layer packets in namespace "ns".
func testDB(t *testing.T, n int) (*store.DB, []format.PacketID) {
	t.Helper()
	db, err := store.Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	spec := &format.ModelSpec{Architecture: "llama", Layers: 1, KVHeads: 1, HeadDim: 2, DType: format.DTypeF32,
		RoPE: format.RoPE{Style: format.RoPERotateHalf, Theta: 10000}, WeightsID: "w"}
	var ids []format.PacketID
	for i := range n {
		p := &store.Packet{
			PacketDesc: format.PacketDesc{Namespace: "ns", Model: spec, TokenIDs: []uint32{uint32(i)}},
			Layers:     []store.Layer{{K: make([]byte, 8), V: make([]byte, 8)}},
		}
		id, err := db.Put(context.Background(), p)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	return db, ids
}

// get fetches path from h and decodes its JSON into v; it returns the status.
func get(t *testing.T, h http.Handler, method, path string, v any) int {
	t.Helper()
	req := httptest.NewRequest(method, path, nil)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("%s: content type %q", path, ct)
	}
	if err := json.Unmarshal(rec.Body.Bytes(), v); err != nil {
		t.Fatalf("%s: %v: %s", path, err, rec.Body)
	}
	return rec.Code
}

func TestHandler(t *testing.T) {
	db, ids := testDB(t, 5)
	h := admin.Handler(db, &admin.Options{MaxList: 3})
	var st admin.Stats
	if code := get(t, h, "GET", "/stats", &st); code != 200 || st.Packets != 5 || len(st.Groups) != 1 || st.Groups[0].Packets != 5 {
		t.Fatalf("/stats %d: %+v", code, st)
	}
	// Paging: at most MaxList rows, then the rest after the cursor.
	var seen []string
	var page admin.List
	if code := get(t, h, "GET", "/ls?limit=10", &page); code != 200 || len(page.Packets) != 3 || !page.More || page.Next == "" {
		t.Fatalf("/ls page 1 %d: %+v", code, page)
	}
	for _, r := range page.Packets {
		seen = append(seen, r.ID)
	}
	next := page
	page = admin.List{}
	if code := get(t, h, "GET", "/ls?after="+url.QueryEscape(next.Next), &page); code != 200 || len(page.Packets) != 2 || page.More {
		t.Fatalf("/ls page 2 %d: %+v", code, page)
	}
	for _, r := range page.Packets {
		seen = append(seen, r.ID)
	}
	all := map[string]bool{}
	for _, id := range seen {
		all[id] = true
	}
	for _, id := range ids {
		if !all[id.String()] {
			t.Errorf("packet %s on no page", id.Short())
		}
	}
	if len(seen) != 5 {
		t.Errorf("%d rows over two pages, want 5", len(seen))
	}
	page = admin.List{}
	if code := get(t, h, "GET", "/ls?ns=other", &page); code != 200 || len(page.Packets) != 0 {
		t.Fatalf("/ls?ns=other %d: %+v", code, page)
	}
	var p admin.Packet
	if code := get(t, h, "GET", "/inspect/"+ids[1].String()[:12], &p); code != 200 || p.ID != ids[1].String() || p.Spec == nil || len(p.Chunks) != 2 {
		t.Fatalf("/inspect %d: %+v", code, p)
	}
	var e struct{ Error string }
	for _, tc := range []struct {
		name string
		want int
	}{{"/inspect/zz", 400}, {"/inspect/ffffffff", 404}, {"/ls?limit=-1", 400}, {"/verify?max_findings=x", 400}} {
		t.Run(tc.name, func(t *testing.T) {
			e.Error = ""
			if code := get(t, h, "GET", tc.name, &e); code != tc.want || e.Error == "" {
				t.Errorf("%s: %d %q, want %d and an error", tc.name, code, e.Error, tc.want)
			}
		})
	}
	for _, m := range []string{"GET", "POST"} {
		var v admin.Verify
		if code := get(t, h, m, "/verify", &v); code != 200 || v.Extents != 5 || len(v.Findings) != 0 {
			t.Errorf("%s /verify %d: %+v", m, code, v)
		}
		var c admin.Check
		if code := get(t, h, m, "/check", &c); code != 200 || c.Packets != 5 || len(c.Findings) != 0 || c.Garbage == nil {
			t.Errorf("%s /check %d: %+v", m, code, c)
		}
	}
}

// verify and check stop when the request's context is cancelled.
func TestHandlerHonoursRequestContext(t *testing.T) {
	db, _ := testDB(t, 3)
	h := admin.Handler(db, nil)
	for _, path := range []string{"/verify", "/check"} {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		req := httptest.NewRequest("GET", path, nil).WithContext(ctx)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		var e struct{ Error string }
		if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || rec.Code != 500 || e.Error == "" {
			t.Errorf("%s with a cancelled context: %d %s", path, rec.Code, rec.Body)
		}
	}
	if _, err := db.Verify(context.Background(), store.VerifyOptions{}); errors.Is(err, context.Canceled) {
		t.Fatal("the store is left cancelled")
	}
}

// Paging with Limit and After lists every packet once in the order of the
// unpaged list, also across namespaces of different lengths, which the
// catalog sorts by length first (a cursor compared as a plain string
// skipped "aa" after "b"); cursors survive a URL and a command line. A
// model filter that is not hex and a malformed cursor are 400s.
func TestListPagesInCatalogOrder(t *testing.T) {
	db, err := store.Open(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	spec := &format.ModelSpec{Architecture: "llama", Layers: 1, KVHeads: 1, HeadDim: 2, DType: format.DTypeF32,
		RoPE: format.RoPE{Style: format.RoPERotateHalf, Theta: 10000}, WeightsID: "w"}
	for i, ns := range []string{"b", "aa", "a", "c/d e", "b", "aa"} {
		p := &store.Packet{PacketDesc: format.PacketDesc{Namespace: ns, Model: spec, TokenIDs: []uint32{uint32(i)}},
			Layers: []store.Layer{{K: make([]byte, 8), V: make([]byte, 8)}}}
		if _, err := db.Put(context.Background(), p); err != nil {
			t.Fatal(err)
		}
	}
	all, err := admin.ListOf(db, admin.ListOptions{})
	if err != nil || len(all.Packets) != 6 {
		t.Fatalf("ListOf: %d packets, %v", len(all.Packets), err)
	}
	h := admin.Handler(db, nil)
	var paged []string
	after := ""
	for range 10 {
		var page admin.List
		if code := get(t, h, "GET", "/ls?limit=1&after="+url.QueryEscape(after), &page); code != 200 {
			t.Fatalf("/ls after %q: %d", after, code)
		}
		for _, r := range page.Packets {
			paged = append(paged, r.Namespace+" "+r.ID)
		}
		if !page.More {
			break
		}
		if strings.ContainsAny(page.Next, "\x00 ") {
			t.Fatalf("cursor %q holds a NUL or a space", page.Next)
		}
		after = page.Next
	}
	var want []string
	for _, r := range all.Packets {
		want = append(want, r.Namespace+" "+r.ID)
	}
	if strings.Join(paged, "\n") != strings.Join(want, "\n") {
		t.Fatalf("pages:\n%s\nunpaged:\n%s", strings.Join(paged, "\n"), strings.Join(want, "\n"))
	}
	var e struct{ Error string }
	for _, path := range []string{"/ls?model=zz", "/ls?after=x", "/ls?after=a/b/c", "/contexts?model=zz", "/contexts?after=x"} {
		e.Error = ""
		if code := get(t, h, "GET", path, &e); code != 400 || e.Error == "" {
			t.Errorf("%s: %d %q, want 400 and an error", path, code, e.Error)
		}
	}
	var cl admin.ContextList
	if code := get(t, h, "GET", "/contexts", &cl); code != 200 || cl.Contexts == nil || len(cl.Contexts) != 0 || cl.More {
		t.Errorf("/contexts of a store without span memories: %d %+v", code, cl)
	}
}

// /inspect with an ns filter that excludes the packet says in which
// namespace it is.
func TestInspectNamesOtherNamespace(t *testing.T) {
	db, ids := testDB(t, 1)
	h := admin.Handler(db, nil)
	var e struct{ Error string }
	if code := get(t, h, "GET", "/inspect/"+ids[0].String()[:8]+"?ns=other", &e); code != 404 ||
		!strings.Contains(e.Error, `in namespace "other"`) || !strings.Contains(e.Error, `it is in namespace "ns"`) {
		t.Fatalf("/inspect?ns=other: %d %q", code, e.Error)
	}
}
