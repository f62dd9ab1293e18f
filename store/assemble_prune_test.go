package store

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/prune"
	"github.com/kvstore/kvstore/reconstruct"
)

// prunedReference fills d with packets ps (decoded tensors) at offsets,
// item i keeping keep[i] (nil: all rows): each kept key shifted by its
// packet's offset, rows in keep order.
func prunedReference(t *testing.T, spec *format.ModelSpec, ps []*Packet, keep []*prune.Set, offsets []int64, total int, d *Dest) {
	t.Helper()
	r, err := reconstruct.NewRoPE(spec.RoPE, spec.HeadDim)
	if err != nil {
		t.Fatal(err)
	}
	H, rb := spec.KVHeads, spec.HeadDim*spec.DType.Size()
	at := func(h, tok int) int {
		if d.Layout == LayoutContiguous {
			return (h*total + tok) * rb
		}
		return ((int(d.BlockTable[tok/d.BlockSize])*d.BlockSize+tok%d.BlockSize)*H + h) * rb
	}
	row := 0
	for i, p := range ps {
		n, rows := p.Tokens(), p.Tokens()
		if keep[i] != nil {
			rows, _ = keep[i].Rows()
		}
		for l := range spec.Layers {
			k := make([]byte, len(p.Layers[l].K))
			if err := reconstruct.Shift(k, p.Layers[l].K, spec.DType, r, H, n, offsets[i]); err != nil {
				t.Fatal(err)
			}
			for h := range H {
				for j := range rows {
					src := j
					if keep[i] != nil {
						src = int(keep[i].Kept(l, h)[j])
					}
					copy(d.K[l][at(h, row+j):], k[(h*n+src)*rb:(h*n+src+1)*rb])
					copy(d.V[l][at(h, row+j):], p.Layers[l].V[(h*n+src)*rb:(h*n+src+1)*rb])
				}
			}
		}
		row += rows
	}
}

// TestAssemblePruned assembles a pruned packet (random ragged keep-sets),
// stored raw and int8, between an unpruned one, into both layouts, and
// compares bytes and the index map with the reference.
func TestAssemblePruned(t *testing.T) {
	for _, k := range storeKinds {
		for _, c := range []format.Codec{format.CodecRaw, format.CodecInt8} {
			t.Run(k.name+"/"+c.String(), func(t *testing.T) {
				db, _, _ := openKind(t, k.disk, k.noMmap)
				defer db.Close()
				spec := testSpec(format.DTypeBF16, 2, 3, 8)
				ps := []*Packet{smoothPacket(spec, "ns", 20, 0, 0, 1, c), smoothPacket(spec, "ns", 6, 1, 1, 2, c)}
				ids := putAll(t, db, ps)
				dec := []*Packet{decodedBack(t, db, spec, ids[0], ps[0], c), decodedBack(t, db, spec, ids[1], ps[1], c)}
				keepSet, err := prune.Random(2, 3, 20, 9, 5)
				if err != nil {
					t.Fatal(err)
				}
				keep := []*prune.Set{keepSet, nil}
				offsets := []int64{4, 30}
				items := []AssembleItem{{ids[0], offsets[0]}, {ids[1], offsets[1]}}
				a, err := db.PrepareAssemblePruned(context.Background(), "ns", spec.Fingerprint(), items, keep)
				if err != nil {
					t.Fatal(err)
				}
				defer a.Release()
				if a.Tokens() != 9+8 || a.Packets()[0].Tokens != 9 || a.Packets()[1].Row != 9 {
					t.Fatalf("tokens %d, packets %+v", a.Tokens(), a.Packets())
				}
				for _, d := range []*Dest{NewContiguousDest(spec, 17), pagedDest(spec, 17, 4, 3)} {
					want := cloneDest(d)
					prunedReference(t, spec, dec, keep, offsets, 17, want)
					if err := a.Run(context.Background(), d, &AssembleOptions{Workers: 2}); err != nil {
						t.Fatal(err)
					}
					diffDest(t, d, want)
				}
				pos, err := a.Positions(1, 2)
				if err != nil {
					t.Fatal(err)
				}
				for j, p := range pos {
					want := offsets[1] + int64(j-9)
					if j < 9 {
						want = offsets[0] + int64(keepSet.Kept(1, 2)[j])
					}
					if p != want {
						t.Fatalf("position of row %d: %d, want %d", j, p, want)
					}
				}
			})
		}
	}
}

func TestAssemblePrunedErrors(t *testing.T) {
	db, _, _ := openKind(t, false, false)
	defer db.Close()
	spec := testSpec(format.DTypeBF16, 1, 2, 8)
	ids := putAll(t, db, []*Packet{smoothPacket(spec, "ns", 5, 0, 0, 1, format.CodecRaw)})
	items := []AssembleItem{{ids[0], 0}}
	for _, tc := range []struct {
		name string
		keep []*prune.Set
	}{
		{"count", []*prune.Set{}},
		{"ragged", []*prune.Set{{Layers: 1, KVHeads: 2, Tokens: 5, Keep: [][]int32{{0, 1}, {2}}}}},
		{"shape", []*prune.Set{{Layers: 1, KVHeads: 2, Tokens: 6, Keep: [][]int32{{0}, {2}}}}},
		{"invalid", []*prune.Set{{Layers: 1, KVHeads: 2, Tokens: 5, Keep: [][]int32{{1, 0}, {2, 3}}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, err := db.PrepareAssemblePruned(context.Background(), "ns", spec.Fingerprint(), items, tc.keep)
			if !errors.Is(err, ErrInvalidArgument) {
				if a != nil {
					a.Release()
				}
				t.Errorf("%s: %v, want ErrInvalidArgument", tc.name, err)
			}
		})
	}
	if s := db.Stats(); s.OpenViews != 0 {
		t.Fatalf("%d views left open", s.OpenViews)
	}
}

// TestAssembleNegativeOffset moves a pruned packet earlier: its kept
// positions all >= 6, placed at Offset -6 (given a keep-set, and stored
// pruned), so its first kept row lands at position 0. The keys must be the
// stored ones rotated by -6 (reconstruct.Shift, bit for bit), in both
// layouts, and one position further (-7) is refused.
func TestAssembleNegativeOffset(t *testing.T) {
	db, _, _ := openKind(t, false, false)
	defer db.Close()
	spec := testSpec(format.DTypeBF16, 2, 3, 8)
	keep := &prune.Set{Layers: 2, KVHeads: 3, Tokens: 20, Keep: make([][]int32, 6)}
	for g := range keep.Keep {
		keep.Keep[g] = []int32{int32(6 + g%3), 9, int32(12 + g%2), 15, 19}
	}
	whole, other := smoothPacket(spec, "ns", 20, 0, 0, 1, format.CodecRaw), smoothPacket(spec, "ns", 6, 0, 0, 2, format.CodecRaw)
	stored := prunedOf(smoothPacket(spec, "pruned", 20, 0, 0, 1, format.CodecRaw), keep)
	ids := putAll(t, db, []*Packet{whole, other})
	sid := putAll(t, db, []*Packet{stored})[0]
	otherPruned := *other
	otherPruned.Namespace = "pruned"
	oid := putAll(t, db, []*Packet{&otherPruned})[0]
	offsets := []int64{-6, 10}
	total := 5 + 6
	for _, tc := range []struct {
		name string
		prep func() (*Assembly, error)
	}{
		{"keep-set", func() (*Assembly, error) {
			return db.PrepareAssemblePruned(context.Background(), "ns", spec.Fingerprint(),
				[]AssembleItem{{ids[0], offsets[0]}, {ids[1], offsets[1]}}, []*prune.Set{keep, nil})
		}},
		{"stored-pruned", func() (*Assembly, error) {
			return db.PrepareAssemble(context.Background(), "pruned", spec.Fingerprint(), []AssembleItem{{sid, offsets[0]}, {oid, offsets[1]}})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, err := tc.prep()
			if err != nil {
				t.Fatal(err)
			}
			defer a.Release()
			if a.Tokens() != total {
				t.Fatalf("tokens %d, want %d", a.Tokens(), total)
			}
			for _, d := range []*Dest{NewContiguousDest(spec, total), pagedDest(spec, total, 4, 3)} {
				want := cloneDest(d)
				prunedReference(t, spec, []*Packet{whole, other}, []*prune.Set{keep, nil}, offsets, total, want)
				if err := a.Run(context.Background(), d, &AssembleOptions{Workers: 2}); err != nil {
					t.Fatal(err)
				}
				diffDest(t, d, want)
			}
			for g := range keep.Keep {
				pos, err := a.Positions(g/3, g%3)
				if err != nil {
					t.Fatal(err)
				}
				if pos[0] != int64(keep.Keep[g][0])-6 || slices.Min(pos) < 0 {
					t.Fatalf("layer %d head %d positions %v", g/3, g%3, pos)
				}
			}
		})
	}
	if _, err := db.PrepareAssemblePruned(context.Background(), "ns", spec.Fingerprint(), []AssembleItem{{ids[0], -7}}, []*prune.Set{keep}); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("keep-set at offset -7 (a row at -1): %v, want ErrInvalidArgument", err)
	}
	if _, err := db.PrepareAssemble(context.Background(), "pruned", spec.Fingerprint(), []AssembleItem{{sid, -7}}); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("stored pruned at offset -7 (a row at -1): %v, want ErrInvalidArgument", err)
	}
	if _, err := db.PrepareAssemble(context.Background(), "ns", spec.Fingerprint(), []AssembleItem{{ids[1], -1}}); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("whole packet at offset -1: %v, want ErrInvalidArgument", err)
	}
	if s := db.Stats(); s.OpenViews != 0 {
		t.Fatalf("%d views left open", s.OpenViews)
	}
}
