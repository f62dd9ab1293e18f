package spandb

import (
	"errors"
	"testing"

	"github.com/cockroachdb/pebble/v2"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store/internal/catalog"
)

func TestList(t *testing.T) {
	fx := newFixture(t)
	if _, _, _, err := fx.put("ns2", "a", memory(t, fx, 64, 1)); err != nil {
		t.Fatal(err)
	}
	mb := memory(t, fx, 48, 2) // routed with the W the first put stored
	if _, _, _, err := fx.put("ns", "b", mb); err != nil {
		t.Fatal(err)
	}
	var got []Info
	if err := List(fx.cat, func(i Info) error { got = append(got, i); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Namespace != "ns" || got[0].Name != "b" || got[1].Namespace != "ns2" {
		t.Fatalf("listed %+v, want (ns, b) then (ns2, a)", got)
	}
	meta, err := fx.s.Meta("ns", "b")
	if err != nil {
		t.Fatal(err)
	}
	factored := 0
	for _, s := range mb.Segmentation.Spans {
		if s.Factored {
			factored++
		}
	}
	i := got[0]
	if i.Context != meta.Context || i.Model != mb.Model.Fingerprint() || i.Tokens != 48 ||
		i.Spans != len(mb.Segmentation.Spans) || i.Factored != factored || factored == 0 ||
		i.Anchors != len(mb.Segmentation.Anchors) || i.Resident != len(mb.Resident) ||
		i.Layers != 2 || i.KVHeads != 2 || i.HeadDim != 16 || i.ProjDim != mb.Projection.Dim ||
		i.ResidentDType != format.DTypeBF16 || i.FactorDType != mb.FactorDType || i.Projection != mb.Projection.Name ||
		i.BlobFile != meta.BlobFile || i.ExtentOffset != meta.ExtentOffset || i.ExtentLength != meta.ExtentLength ||
		i.Created.UnixNano() != meta.CreatedUnixNs || i.Created.Location().String() != "UTC" {
		t.Fatalf("info %+v does not match root record %+v", i, meta)
	}
	// fn's error stops the walk and is returned.
	stop, calls := errors.New("stop"), 0
	if err := List(fx.cat, func(Info) error { calls++; return stop }); err != stop || calls != 1 {
		t.Fatalf("List returned %v after %d calls, want fn's error after 1", err, calls)
	}
	if n, err := Count(fx.cat); err != nil || n != 2 {
		t.Fatalf("count %d (%v), want 2", n, err)
	}
	// A record that does not decode, or sits under another context's key,
	// stops the walk with ErrCorruption; Count does not decode.
	var v []byte
	_, _ = fx.cat.Get(catalog.SpanMetaKey("ns", "b"), func(b []byte) error { v = append(v, b...); return nil })
	for _, bad := range [][]byte{v, []byte("not a record")} {
		if err := fx.cat.DB.Set(catalog.SpanMetaKey("ns", "c"), bad, pebble.Sync); err != nil {
			t.Fatal(err)
		}
		if err := List(fx.cat, func(Info) error { return nil }); !errors.Is(err, format.ErrCorruption) {
			t.Fatalf("List over a bad record: %v, want ErrCorruption", err)
		}
	}
	if n, err := Count(fx.cat); err != nil || n != 3 {
		t.Fatalf("count %d (%v), want 3", n, err)
	}
}
