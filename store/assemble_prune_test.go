package store

import (
	"errors"
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
				a, err := db.PrepareAssemblePruned("ns", spec.Fingerprint(), items, keep)
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
					if err := a.Run(d, &AssembleOptions{Workers: 2}); err != nil {
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
	for name, keep := range map[string][]*prune.Set{
		"count":   {},
		"ragged":  {{Layers: 1, KVHeads: 2, Tokens: 5, Keep: [][]int32{{0, 1}, {2}}}},
		"shape":   {{Layers: 1, KVHeads: 2, Tokens: 6, Keep: [][]int32{{0}, {2}}}},
		"invalid": {{Layers: 1, KVHeads: 2, Tokens: 5, Keep: [][]int32{{1, 0}, {2, 3}}}},
	} {
		a, err := db.PrepareAssemblePruned("ns", spec.Fingerprint(), items, keep)
		if !errors.Is(err, ErrInvalidArgument) {
			if a != nil {
				a.Release()
			}
			t.Errorf("%s: %v, want ErrInvalidArgument", name, err)
		}
	}
	if s := db.Stats(); s.OpenViews != 0 {
		t.Fatalf("%d views left open", s.OpenViews)
	}
}
