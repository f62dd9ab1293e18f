package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/kvstore/kvstore/format"
)

// TestAssembleTransposedV checks LayoutTransposedV against a contiguous
// assembly of the same packets: K token-major, V transposed, element by
// element, for raw and compressed chunks, mapped and copied stores, one
// and several workers.
func TestAssembleTransposedV(t *testing.T) {
	for _, k := range storeKinds {
		for _, sc := range assembleSpecs {
			t.Run(k.name+"/"+sc.name, func(t *testing.T) {
				db, _, _ := openKind(t, k.disk, k.noMmap)
				defer db.Close()
				ps := []*Packet{
					floatPacket(sc.spec, "ns", 7, 0, 0, 11),
					floatPacket(sc.spec, "ns", 5, 2, 3, 12),
					floatPacket(sc.spec, "ns", 600, 0, 0, 13), // runs of scratch
				}
				ps[1].Codec = format.CodecShuffleZstd
				ids := putAll(t, db, ps)
				total := 7 + 10 + 600
				items := []AssembleItem{{ID: ids[0], Offset: 0}, {ID: ids[1], Offset: 7}, {ID: ids[2], Offset: 40}}
				want := NewContiguousDest(sc.spec, total)
				if err := db.Assemble(context.Background(), "ns", sc.spec.Fingerprint(), items, want, nil); err != nil {
					t.Fatal(err)
				}
				for _, workers := range []int{1, 3} {
					got := NewContiguousDest(sc.spec, total)
					got.Layout = LayoutTransposedV
					if err := db.Assemble(context.Background(), "ns", sc.spec.Fingerprint(), items, got, &AssembleOptions{Workers: workers}); err != nil {
						t.Fatalf("workers %d: %v", workers, err)
					}
					checkTransposed(t, sc.spec, total, want, got)
				}
			})
		}
	}
}

// checkTransposed compares a LayoutTransposedV destination with the
// contiguous one of the same assembly.
func checkTransposed(t *testing.T, m *format.ModelSpec, T int, want, got *Dest) {
	t.Helper()
	es, H, D := m.DType.Size(), m.KVHeads, m.HeadDim
	for l := range m.Layers {
		for h := range H {
			for tok := range T {
				for d := range D {
					src := ((h*T+tok)*D + d) * es
					k := ((tok*H+h)*D + d) * es
					v := ((h*D+d)*T + tok) * es
					if !bytes.Equal(got.K[l][k:k+es], want.K[l][src:src+es]) || !bytes.Equal(got.V[l][v:v+es], want.V[l][src:src+es]) {
						t.Fatalf("layer %d head %d token %d dim %d: K %x V %x, want %x %x", l, h, tok, d,
							got.K[l][k:k+es], got.V[l][v:v+es], want.K[l][src:src+es], want.V[l][src:src+es])
					}
				}
			}
		}
	}
}

// TestAssembleTransposedVBadDest: a buffer of the wrong size is refused
// before anything is written.
func TestAssembleTransposedVBadDest(t *testing.T) {
	spec := assembleSpecs[0].spec
	db := openMem(t, nil, nil)
	defer db.Close()
	ids := putAll(t, db, []*Packet{floatPacket(spec, "ns", 4, 0, 0, 1)})
	d := NewContiguousDest(spec, 4)
	d.Layout = LayoutTransposedV
	d.V[0] = append(d.V[0], 0)
	err := db.Assemble(context.Background(), "ns", spec.Fingerprint(), []AssembleItem{{ID: ids[0]}}, d, nil)
	if !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("got %v, want ErrInvalidArgument", err)
	}
	if fmt.Sprint(LayoutTransposedV) != "transposed-v" {
		t.Fatalf("String %q", LayoutTransposedV)
	}
}
