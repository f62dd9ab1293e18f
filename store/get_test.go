package store

import (
	"context"
	"errors"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/kvstore/kvstore/format"
)

func TestGetNotFoundAndModelMismatch(t *testing.T) {
	db := openMem(t, vfs.NewMem(), nil)
	defer db.Close()
	a := testSpec(format.DTypeBF16, 2, 2, 8)
	b := testSpec(format.DTypeBF16, 2, 2, 8)
	b.WeightsID = "other weights"
	p := randPacket(a, "ns", 6, 1)
	id, err := db.Put(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Get(context.Background(), "ns", b.Fingerprint(), id); !errors.Is(err, ErrModelMismatch) {
		t.Fatalf("Get under another model: %v, want ErrModelMismatch", err)
	}
	if ok, err := db.Has(context.Background(), "ns", b.Fingerprint(), id); ok || !errors.Is(err, ErrModelMismatch) {
		t.Fatalf("Has under another model: %v, %v", ok, err)
	}
	if err := db.Delete(context.Background(), "ns", b.Fingerprint(), id); !errors.Is(err, ErrModelMismatch) {
		t.Fatalf("Delete under another model: %v", err)
	}
	var absent format.PacketID
	absent[0] = 1
	if _, err := db.Get(context.Background(), "ns", a.Fingerprint(), absent); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get of an absent id: %v, want ErrNotFound", err)
	}
	if ok, err := db.Has(context.Background(), "ns", a.Fingerprint(), absent); ok || err != nil {
		t.Fatalf("Has of an absent id: %v, %v", ok, err)
	}
	if ok, err := db.Has(context.Background(), "ns", a.Fingerprint(), id); !ok || err != nil {
		t.Fatalf("Has: %v, %v", ok, err)
	}
	s := db.Stats()
	if s.Gets != 2 || s.Hits != 0 || s.Misses != 2 {
		t.Fatalf("stats %+v", s)
	}
}

func TestNamespacesIsolated(t *testing.T) {
	db := openMem(t, vfs.NewMem(), nil)
	defer db.Close()
	spec := testSpec(format.DTypeBF16, 2, 2, 8)
	fp := spec.Fingerprint()
	// "a" + "b..." must not meet "ab" + "...": namespaces are length-prefixed.
	pa := randPacket(spec, "a", 5, 1)
	pab := randPacket(spec, "ab", 5, 1) // same tokens and tensors, other namespace
	ida, err := db.Put(context.Background(), pa)
	if err != nil {
		t.Fatal(err)
	}
	idab, err := db.Put(context.Background(), pab)
	if err != nil {
		t.Fatal(err)
	}
	if ida == idab {
		t.Fatal("the same document in two namespaces has one id")
	}
	if _, err := db.Get(context.Background(), "ab", fp, ida); !errors.Is(err, ErrNotFound) {
		t.Fatalf("namespace ab sees a's packet: %v", err)
	}
	if _, err := db.Get(context.Background(), "", fp, ida); !errors.Is(err, ErrNotFound) {
		t.Fatalf("the empty namespace sees a's packet: %v", err)
	}
	for _, ns := range []string{"a", "ab"} {
		ids, _, err := db.List(ns, fp, nil, 10)
		if err != nil || len(ids) != 1 {
			t.Fatalf("List(%q) = %v, %v; want one id", ns, ids, err)
		}
	}
	if err := db.Delete(context.Background(), "a", fp, ida); err != nil {
		t.Fatal(err)
	}
	checkPacket(t, db, pab, idab)
}

func TestModel(t *testing.T) {
	fs := vfs.NewMem()
	db := openMem(t, fs, nil)
	spec := testSpec(format.DTypeF16, 3, 2, 5)
	spec.RoPE.Scaling, spec.RoPE.Factor = format.RoPEScalingLinear, 2
	if _, err := db.Model(spec.Fingerprint()); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Model before Put: %v", err)
	}
	if _, err := db.Put(context.Background(), randPacket(spec, "", 2, 3)); err != nil {
		t.Fatal(err)
	}
	db.Close()
	db = openMem(t, fs, nil)
	defer db.Close()
	m, err := db.Model(spec.Fingerprint())
	if err != nil {
		t.Fatal(err)
	}
	if *m != *spec {
		t.Fatalf("Model = %+v, want %+v", m, spec)
	}
	m.Layers = 99 // a copy: the cache is not touched
	if m2, _ := db.Model(spec.Fingerprint()); m2.Layers != 3 {
		t.Fatal("Model returned the cached spec itself")
	}
}
