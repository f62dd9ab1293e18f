package store

import (
	"context"
	"errors"
	"testing"

	"github.com/kvstore/kvstore/format"
)

// destAt is where element e of row (h, t) of a K (kind 0) or V (kind 1)
// buffer of d lies, written out from each layout's tensor shape.
func destAt(spec *format.ModelSpec, d *Dest, tokens, kind, h, t, e int) int {
	H, hd, es := spec.KVHeads, spec.HeadDim, spec.DType.Size()
	var b, bs, s int
	if d.BlockSize > 0 {
		b, bs, s = int(d.BlockTable[t/d.BlockSize]), d.BlockSize, t%d.BlockSize
	}
	switch d.Layout {
	case LayoutContiguous: // [H][T][hd]
		return ((h*tokens+t)*hd + e) * es
	case LayoutPaged: // [blocks][bs][H][hd]
		return (((b*bs+s)*H+h)*hd + e) * es
	case LayoutTransposedV: // K [T][H][hd], V [H*hd][T]
		if kind == 0 {
			return ((t*H+h)*hd + e) * es
		}
		return ((h*hd+e)*tokens + t) * es
	case LayoutPagedKV: // one pool [blocks][2][bs][H][hd]
		pool := func(b, kind, s, h, e int) int { return ((((b*2+kind)*bs+s)*H+h)*hd + e) * es }
		return pool(b, kind, s, h, e) - pool(0, kind, 0, 0, 0)
	case LayoutPagedPacked: // one pool [blocks][H][bs][2*hd]
		pool := func(b, kind, s, h, e int) int { return (((b*H+h)*bs+s)*2*hd + kind*hd + e) * es }
		return pool(b, kind, s, h, e) - pool(0, kind, 0, 0, 0)
	}
	panic("destAt: layout")
}

// TestAssembleInto assembles two packets (one re-rotated) into a
// destination AssembleInto allocates, in every layout, and compares each
// element with the reference contiguous assembly at the layout's index.
func TestAssembleInto(t *testing.T) {
	db, _, _ := openKind(t, false, false)
	defer db.Close()
	spec := testSpec(format.DTypeBF16, 2, 3, 8)
	ps := []*Packet{floatPacket(spec, "ns", 9, 1, 0, 1), floatPacket(spec, "ns", 5, 0, 1, 2)}
	ids := putAll(t, db, ps)
	offsets := []int64{0, 17}
	items := []AssembleItem{{ids[0], offsets[0]}, {ids[1], offsets[1]}}
	total := ps[0].Tokens() + ps[1].Tokens()
	ref := NewContiguousDest(spec, total)
	referenceAssemble(t, spec, ps, offsets, ref)
	es := spec.DType.Size()
	for _, s := range []DestShape{
		{Layout: LayoutContiguous}, {Layout: LayoutTransposedV}, {Layout: LayoutPaged, BlockSize: 4},
		{Layout: LayoutPagedKV, BlockSize: 3}, {Layout: LayoutPagedPacked, BlockSize: 5},
	} {
		d, err := db.AssembleInto(context.Background(), "ns", spec.Fingerprint(), items, s, &AssembleOptions{Workers: 2})
		if err != nil {
			t.Fatalf("%v: %v", s.Layout, err)
		}
		for l := range spec.Layers {
			for kind, bufs := range [][][]byte{d.K, d.V} {
				want := [][][]byte{ref.K, ref.V}[kind][l]
				for h := range spec.KVHeads {
					for tok := range total {
						for e := range spec.HeadDim {
							g, w := destAt(spec, d, total, kind, h, tok, e), destAt(spec, ref, total, kind, h, tok, e)
							if string(bufs[l][g:g+es]) != string(want[w:w+es]) {
								t.Fatalf("%v: layer %d kind %d head %d token %d dim %d differs", s.Layout, l, kind, h, tok, e)
							}
						}
					}
				}
			}
		}
	}
	if _, err := db.AssembleInto(context.Background(), "ns", spec.Fingerprint(), items, DestShape{Layout: LayoutPaged}, nil); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("paged without a block size: %v, want ErrInvalidArgument", err)
	}
	if s := db.Stats(); s.OpenViews != 0 {
		t.Fatalf("%d views left open", s.OpenViews)
	}
}

// TestNewPooledDest runs an assembly into a server's pools (vLLM's two
// pooled layouts) with a block table that skips and reverses blocks, and
// checks the rows against the reference through the pool's own index.
func TestNewPooledDest(t *testing.T) {
	db, _, _ := openKind(t, false, false)
	defer db.Close()
	spec := testSpec(format.DTypeF16, 2, 2, 8)
	ps := []*Packet{floatPacket(spec, "ns", 7, 0, 0, 3)}
	ids := putAll(t, db, ps)
	ref := NewContiguousDest(spec, 7)
	referenceAssemble(t, spec, ps, []int64{5}, ref)
	es := spec.DType.Size()
	for _, layout := range []Layout{LayoutPagedKV, LayoutPagedPacked} {
		const bs, blocks = 2, 6
		pools := make([][]byte, spec.Layers)
		for l := range pools {
			pools[l] = make([]byte, blocks*2*bs*spec.KVHeads*spec.HeadDim*es)
		}
		d, err := NewPooledDest(spec, layout, pools, bs, []int32{5, 3, 1, 0})
		if err != nil {
			t.Fatal(err)
		}
		if err := db.Assemble(context.Background(), "ns", spec.Fingerprint(), []AssembleItem{{ids[0], 5}}, d, nil); err != nil {
			t.Fatalf("%v: %v", layout, err)
		}
		for l := range spec.Layers {
			for kind := range 2 {
				want := [][][]byte{ref.K, ref.V}[kind][l]
				base := 0
				if kind == 1 {
					base = bs * spec.KVHeads * spec.HeadDim * es // [b][1] in [blocks][2][bs][H][hd]
					if layout == LayoutPagedPacked {
						base = spec.HeadDim * es // [..][hd:] in [blocks][H][bs][2*hd]
					}
				}
				for h := range spec.KVHeads {
					for tok := range 7 {
						for e := range spec.HeadDim {
							g, w := base+destAt(spec, d, 7, kind, h, tok, e), destAt(spec, ref, 7, kind, h, tok, e)
							if string(pools[l][g:g+es]) != string(want[w:w+es]) {
								t.Fatalf("%v: layer %d kind %d head %d token %d dim %d differs", layout, l, kind, h, tok, e)
							}
						}
					}
				}
			}
		}
	}
}
