package catalog

import (
	"errors"
	"slices"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/kvstore/kvstore/format"
)

// TestList: List pages through one (namespace, model)'s index keys in id
// order, never another's, with cursors that resume after the last id, and
// refuses a bad limit or cursor and a malformed key.
func TestList(t *testing.T) {
	c, err := openMem(t, vfs.NewMem(), false)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fp, other := format.Fingerprint{1}, format.Fingerprint{2}
	b := c.DB.NewBatch()
	var want []format.PacketID
	for i := range 7 {
		id := format.PacketID{byte(7 - i), byte(i)}
		want = append(want, id)
		_ = b.Set(IndexKey("ns", fp, id), nil, nil)
		_ = b.Set(IndexKey("ns", other, id), nil, nil)
		_ = b.Set(IndexKey("ns2", fp, format.PacketID{0xff, byte(i)}), nil, nil)
	}
	if err := c.Commit(b); err != nil {
		t.Fatal(err)
	}
	_ = b.Close()
	slices.SortFunc(want, func(a, b format.PacketID) int { return slices.Compare(a[:], b[:]) })
	for _, limit := range []int{1, 3, 7, 10} {
		var got []format.PacketID
		var cursor []byte
		for pages := 0; ; pages++ {
			if pages > len(want) {
				t.Fatalf("limit %d: no end of pages", limit)
			}
			ids, next, err := c.List("ns", fp, cursor, limit)
			if err != nil {
				t.Fatal(err)
			}
			if len(ids) > limit {
				t.Fatalf("limit %d: page of %d", limit, len(ids))
			}
			got = append(got, ids...)
			if next == nil {
				break
			}
			if last := ids[len(ids)-1]; string(next) != string(last[:]) {
				t.Fatalf("limit %d: cursor %x is not the last id %x", limit, next, last)
			}
			cursor = next
		}
		if !slices.Equal(got, want) {
			t.Fatalf("limit %d: listed %x, want %x", limit, got, want)
		}
	}
	if _, _, err := c.List("ns", fp, nil, 0); !errors.Is(err, format.ErrInvalidArgument) {
		t.Fatalf("limit 0: %v", err)
	}
	if _, _, err := c.List("ns", fp, []byte{1, 2}, 1); !errors.Is(err, format.ErrInvalidArgument) {
		t.Fatalf("short cursor: %v", err)
	}
	b = c.DB.NewBatch()
	_ = b.Set(append(IndexPrefix("bad", fp), 1, 2, 3), nil, nil)
	if err := c.Commit(b); err != nil {
		t.Fatal(err)
	}
	_ = b.Close()
	if _, _, err := c.List("bad", fp, nil, 5); !errors.Is(err, format.ErrCorruption) {
		t.Fatalf("malformed index key: %v", err)
	}
}

// TestHeaders: Headers walks every header in key order, stops at fn's
// error, and stops with ErrCorruption at a value that does not decode.
func TestHeaders(t *testing.T) {
	c, err := openMem(t, vfs.NewMem(), false)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	hs := []*format.PacketHeader{testHeader("b", 2), testHeader("a", 1), testHeader("a", 3)}
	putHeaders(t, c, hs...)
	var got []*format.PacketHeader
	if err := c.Headers(func(h *format.PacketHeader) error { got = append(got, h); return nil }); err != nil {
		t.Fatal(err)
	}
	a1, a3 := hs[1].ID, hs[2].ID
	if slices.Compare(a1[:], a3[:]) > 0 {
		a1, a3 = a3, a1
	}
	if len(got) != 3 || got[0].ID != a1 || got[1].ID != a3 || got[2].ID != hs[0].ID || got[2].Namespace != "b" {
		t.Fatalf("headers not in (namespace, id) order: %v", got)
	}
	stop := errors.New("stop")
	n := 0
	if err := c.Headers(func(*format.PacketHeader) error { n++; return stop }); err != stop || n != 1 {
		t.Fatalf("fn's error: %v after %d", err, n)
	}
	b := c.DB.NewBatch()
	_ = b.Set(HeaderKey("c", format.PacketID{4}), []byte("junk"), nil)
	if err := c.Commit(b); err != nil {
		t.Fatal(err)
	}
	_ = b.Close()
	if err := c.Headers(func(*format.PacketHeader) error { return nil }); !errors.Is(err, format.ErrCorruption) {
		t.Fatalf("undecodable header: %v", err)
	}
}
