package store

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/kvstore/kvstore/format"
)

// A Scope's calls are the DB's with the namespace and model filled in, and
// it refuses a packet of another namespace or model.
func TestScope(t *testing.T) {
	ctx := context.Background()
	db := openMem(t, vfs.NewMem(), nil)
	defer db.Close()
	spec := testSpec(format.DTypeF32, 2, 2, 8)
	sc, err := db.Scope("tenant", spec)
	if err != nil {
		t.Fatal(err)
	}
	p := randPacket(spec, "", 6, 1)
	p.Model = nil
	id, err := sc.Put(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if p.Namespace != "" || p.Model != nil {
		t.Fatal("Scope.Put modified the caller's packet")
	}
	want := format.ComputePacketID("tenant", spec.Fingerprint(), "", p.TokenIDs)
	if id != want {
		t.Fatalf("id %s, want the packet's id in the scope's namespace %s", id.Short(), want.Short())
	}
	q := randPacket(spec, "tenant", 4, 2)
	id2, err := sc.Put(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sc.Put(ctx, randPacket(spec, "other", 4, 3)); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("Put of another namespace's packet: %v", err)
	}
	if _, err := sc.Put(ctx, randPacket(testSpec(format.DTypeF32, 2, 2, 16), "tenant", 4, 3)); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("Put of another model's packet: %v", err)
	}

	v, err := sc.Get(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	k, _, err := v.Layer(1)
	if err != nil || !bytes.Equal(k, p.Layers[1].K) {
		t.Fatalf("Scope.Get layer 1: %v", err)
	}
	v.Release()
	if ok, err := sc.Has(ctx, id); err != nil || !ok {
		t.Fatalf("Has: %v %v", ok, err)
	}
	if ids, _, err := sc.List(nil, 10); err != nil || len(ids) != 2 {
		t.Fatalf("List: %v %v", ids, err)
	}
	dst, err := sc.AssembleInto(ctx, []AssembleItem{{id, 0}, {id2, 6}}, DestShape{Layout: LayoutContiguous}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ref := NewContiguousDest(spec, 10)
	if err := db.Assemble(ctx, "tenant", spec.Fingerprint(), []AssembleItem{{id, 0}, {id2, 6}}, ref, nil); err != nil {
		t.Fatal(err)
	}
	for l := range ref.K {
		if !bytes.Equal(dst.K[l], ref.K[l]) || !bytes.Equal(dst.V[l], ref.V[l]) {
			t.Fatalf("layer %d: Scope.AssembleInto differs from DB.Assemble", l)
		}
	}
	if err := sc.Pin(id); err != nil {
		t.Fatal(err)
	}
	if ok, err := sc.Pinned(id); err != nil || !ok {
		t.Fatalf("Pinned: %v %v", ok, err)
	}
	if err := sc.Delete(ctx, id2); err != nil {
		t.Fatal(err)
	}
	if _, err := sc.Get(ctx, id2); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get after Delete: %v", err)
	}
	if _, err := db.Scope("tenant", nil); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("Scope with no spec: %v", err)
	}
}

// A Scope names its model's weights: a spec without a WeightsID, which
// would let models of one shape and different weights share packets, is
// ErrInvalidArgument.
func TestScopeNeedsWeightsID(t *testing.T) {
	db := openMem(t, vfs.NewMem(), nil)
	defer db.Close()
	spec := testSpec(format.DTypeF32, 2, 2, 8)
	spec.WeightsID = ""
	if sc, err := db.Scope("tenant", spec); !errors.Is(err, ErrInvalidArgument) || sc != nil {
		t.Fatalf("Scope of a spec without WeightsID: %v, want ErrInvalidArgument", err)
	}
}

// The request path takes a context: a done context stops Put before it
// writes, Get and PrepareAssemble before they read, and Assemble between
// layers.
func TestRequestContext(t *testing.T) {
	db := openMem(t, vfs.NewMem(), nil)
	defer db.Close()
	spec := testSpec(format.DTypeF32, 4, 2, 8)
	fp := spec.Fingerprint()
	id, err := db.Put(context.Background(), randPacket(spec, "ns", 8, 1))
	if err != nil {
		t.Fatal(err)
	}
	done, cancel := context.WithCancel(context.Background())
	cancel()
	before := db.Stats()
	if _, err := db.Put(done, randPacket(spec, "ns", 8, 2)); !errors.Is(err, context.Canceled) {
		t.Fatalf("Put with a done context: %v", err)
	}
	if after := db.Stats(); after.Packets != before.Packets || after.BytesWritten != before.BytesWritten {
		t.Fatalf("a cancelled Put wrote: %d -> %d packets, %d -> %d bytes", before.Packets, after.Packets, before.BytesWritten, after.BytesWritten)
	}
	if _, err := db.Get(done, "ns", fp, id); !errors.Is(err, context.Canceled) {
		t.Fatalf("Get with a done context: %v", err)
	}
	if err := db.Delete(done, "ns", fp, id); !errors.Is(err, context.Canceled) {
		t.Fatalf("Delete with a done context: %v", err)
	}
	if _, err := db.PrepareAssemble(done, "ns", fp, []AssembleItem{{id, 0}}); !errors.Is(err, context.Canceled) {
		t.Fatalf("PrepareAssemble with a done context: %v", err)
	}

	// Cancelled while layer 0 is reported: no later layer is reported.
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var reported []int
	o := &AssembleOptions{Workers: 1, OnLayer: func(l int) error {
		reported = append(reported, l)
		if l == 0 {
			stop()
		}
		return nil
	}}
	err = db.Assemble(ctx, "ns", fp, []AssembleItem{{id, 0}}, NewContiguousDest(spec, 8), o)
	if !errors.Is(err, context.Canceled) || len(reported) == spec.Layers {
		t.Fatalf("Assemble cancelled at layer 0: %v, layers reported %v", err, reported)
	}
	if ok, err := db.Has(context.Background(), "ns", fp, id); err != nil || !ok {
		t.Fatalf("the packet after the cancelled calls: %v %v", ok, err)
	}
}

// Dynamic NTK scaling: Assemble shifts keys exactly up to
// original_max_position_embeddings and refuses a longer sequence, whose
// frequencies differ, instead of returning wrongly rotated keys.
func TestAssembleDynamicNTK(t *testing.T) {
	ctx := context.Background()
	db := openMem(t, vfs.NewMem(), nil)
	defer db.Close()
	spec := testSpec(format.DTypeF32, 2, 1, 8)
	spec.RoPE.Scaling, spec.RoPE.Factor, spec.RoPE.OriginalMaxPos = format.RoPEScalingDynamic, 2, 16
	id, err := db.Put(ctx, randPacket(spec, "ns", 8, 1))
	if err != nil {
		t.Fatal(err)
	}
	fp := spec.Fingerprint()
	if err := db.Assemble(ctx, "ns", fp, []AssembleItem{{id, 8}}, NewContiguousDest(spec, 8), nil); err != nil {
		t.Fatalf("Assemble within original_max_position_embeddings: %v", err)
	}
	if err := db.Assemble(ctx, "ns", fp, []AssembleItem{{id, 9}}, NewContiguousDest(spec, 8), nil); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("Assemble past original_max_position_embeddings: %v, want ErrInvalidArgument", err)
	}
}

// A catalogued blob file gone from disk is damage: Get says so with
// ErrCorruption (it wrapped no sentinel before).
func TestGetMissingBlobFile(t *testing.T) {
	ctx := context.Background()
	fs := vfs.NewMem()
	db := openMem(t, fs, nil)
	spec := testSpec(format.DTypeF32, 2, 1, 8)
	id, err := db.Put(ctx, randPacket(spec, "ns", 8, 1))
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := fs.Remove("/db/blobs/000001.blob"); err != nil {
		t.Fatal(err)
	}
	db, err = Open("/db", &Options{FS: fs, Logger: quiet, ReadOnly: true})
	if err != nil {
		if !errors.Is(err, ErrCorruption) {
			t.Fatalf("Open of a store missing a blob file: %v, want ErrCorruption", err)
		}
		return
	}
	defer db.Close()
	if _, err := db.Get(ctx, "ns", spec.Fingerprint(), id); !errors.Is(err, ErrCorruption) {
		t.Fatalf("Get of a packet whose blob file is gone: %v, want ErrCorruption", err)
	}
}
