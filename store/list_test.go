package store

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/kvstore/kvstore/format"
)

func TestListPaginationAndDelete(t *testing.T) {
	db := openMem(t, vfs.NewMem(), nil)
	defer db.Close()
	spec := testSpec(format.DTypeBF16, 1, 1, 4)
	other := testSpec(format.DTypeF16, 1, 1, 4)
	fp := spec.Fingerprint()
	var want []format.PacketID
	for i := range 23 {
		id, err := db.Put(context.Background(), randPacket(spec, "ns", 2, uint64(i)))
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, id)
		if _, err := db.Put(context.Background(), randPacket(other, "ns", 2, uint64(i))); err != nil {
			t.Fatal(err)
		}
	}
	slices.SortFunc(want, func(a, b format.PacketID) int { return bytes.Compare(a[:], b[:]) })
	for _, limit := range []int{1, 5, 23, 100} {
		var got []format.PacketID
		var cursor []byte
		pages := 0
		for {
			ids, next, err := db.List("ns", fp, cursor, limit)
			if err != nil {
				t.Fatal(err)
			}
			if len(ids) > limit {
				t.Fatalf("page of %d ids for limit %d", len(ids), limit)
			}
			got = append(got, ids...)
			pages++
			if next == nil {
				break
			}
			cursor = next
		}
		if !slices.Equal(got, want) {
			t.Fatalf("limit %d: listed %d ids, want %d in order", limit, len(got), len(want))
		}
		if wantPages := (len(want) + limit - 1) / limit; pages != wantPages && pages != wantPages+1 {
			t.Fatalf("limit %d: %d pages", limit, pages)
		}
	}
	if _, _, err := db.List("ns", fp, nil, 0); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("limit 0: %v", err)
	}
	if _, _, err := db.List("ns", fp, []byte{1, 2}, 3); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("bad cursor: %v", err)
	}

	// Delete every other packet: List and Has follow, accounting moves bytes to dead.
	before := db.Stats()
	for i := 0; i < len(want); i += 2 {
		if err := db.Delete(context.Background(), "ns", fp, want[i]); err != nil {
			t.Fatal(err)
		}
		if ok, err := db.Has(context.Background(), "ns", fp, want[i]); ok || err != nil {
			t.Fatalf("Has after Delete: %v, %v", ok, err)
		}
	}
	if err := db.Delete(context.Background(), "ns", fp, want[0]); !errors.Is(err, ErrNotFound) {
		t.Fatalf("second Delete: %v, want ErrNotFound", err)
	}
	ids, _, err := db.List("ns", fp, nil, 100)
	if err != nil {
		t.Fatal(err)
	}
	var kept []format.PacketID
	for i := 1; i < len(want); i += 2 {
		kept = append(kept, want[i])
	}
	if !slices.Equal(ids, kept) {
		t.Fatalf("after deletes listed %d ids, want %d", len(ids), len(kept))
	}
	after := db.Stats()
	deleted := uint64((len(want) + 1) / 2)
	// Each delete kills a 4 KiB extent and appends a 4 KiB tombstone (dead).
	if after.Packets != before.Packets-deleted || after.DeadBytes != 2*deleted*format.Alignment ||
		after.LiveBytes+after.DeadBytes != before.LiveBytes+deleted*format.Alignment || after.Deletes != deleted {
		t.Fatalf("accounting after %d deletes: before %+v after %+v", deleted, before, after)
	}
}

func TestHeaders(t *testing.T) {
	db := openMem(t, vfs.NewMem(), nil)
	defer db.Close()
	spec := testSpec(format.DTypeBF16, 2, 1, 4)
	want := map[format.PacketID]bool{}
	for i, ns := range []string{"x", "y", "y", ""} {
		id, err := db.Put(context.Background(), randPacket(spec, ns, 3, uint64(i)))
		if err != nil {
			t.Fatal(err)
		}
		want[id] = true
	}
	n := 0
	err := db.Headers(func(h *format.PacketHeader) error {
		if !want[h.ID] {
			t.Errorf("unexpected header %s", h.ID.Short())
		}
		n++
		return nil
	})
	if err != nil || n != len(want) {
		t.Fatalf("Headers: %d headers, %v", n, err)
	}
	stop := errors.New("stop")
	if err := db.Headers(func(*format.PacketHeader) error { return stop }); err != stop {
		t.Fatalf("Headers did not return fn's error: %v", err)
	}
}
