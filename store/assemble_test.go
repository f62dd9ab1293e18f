package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/reconstruct"
	"github.com/kvstore/kvstore/store/internal/view"
)

// floatPacket returns a packet of spec with finite random elements in
// [-4, 4), header and trailer adapter rows around tokens document rows
// (an unnamed adapter: Put checks named ones, see store/adapter_test.go).
func floatPacket(spec *format.ModelSpec, ns string, tokens, header, trailer int, seed uint64) *Packet {
	rng := rand.New(rand.NewPCG(seed, 0xa55e))
	p := &Packet{PacketDesc: format.PacketDesc{Namespace: ns, Model: spec, TokenIDs: make([]uint32, tokens), HeaderTokens: header, TrailerTokens: trailer}}
	for i := range p.TokenIDs {
		p.TokenIDs[i] = rng.Uint32N(1000)
	}
	n := spec.KVHeads * p.Tokens() * spec.HeadDim
	f := make([]float32, n)
	for range spec.Layers {
		var l Layer
		for _, dst := range []*[]byte{&l.K, &l.V} {
			for i := range f {
				f[i] = float32(rng.Float64()*8 - 4)
			}
			*dst = make([]byte, n*spec.DType.Size())
			if err := format.FromF32(*dst, f, spec.DType); err != nil {
				panic(err)
			}
		}
		p.Layers = append(p.Layers, l)
	}
	return p
}

// pagedDest returns a paged destination for tokens rows of spec with
// spare blocks, the block table a permutation, every byte set to 0xAB.
func pagedDest(spec *format.ModelSpec, tokens, bs int, seed uint64) *Dest {
	need := (tokens + bs - 1) / bs
	blocks := need + 3
	rng := rand.New(rand.NewPCG(seed, 7))
	perm := rng.Perm(blocks)
	d := &Dest{Layout: LayoutPaged, BlockSize: bs, K: make([][]byte, spec.Layers), V: make([][]byte, spec.Layers)}
	for _, b := range perm[:need] {
		d.BlockTable = append(d.BlockTable, int32(b))
	}
	n := blocks * bs * spec.KVHeads * spec.HeadDim * spec.DType.Size()
	for l := range spec.Layers {
		d.K[l], d.V[l] = bytes.Repeat([]byte{0xAB}, n), bytes.Repeat([]byte{0xAB}, n)
	}
	return d
}

// cloneDest copies d's buffers (the table is shared).
func cloneDest(d *Dest) *Dest {
	c := *d
	c.K, c.V = make([][]byte, len(d.K)), make([][]byte, len(d.V))
	for l := range d.K {
		c.K[l], c.V[l] = bytes.Clone(d.K[l]), bytes.Clone(d.V[l])
	}
	return &c
}

// referenceAssemble fills d the obvious way: each packet's keys shifted
// whole by its offset, then every (head, token) row copied to where the
// layout says.
func referenceAssemble(t *testing.T, spec *format.ModelSpec, ps []*Packet, offsets []int64, d *Dest) {
	t.Helper()
	r, err := reconstruct.NewRoPE(spec.RoPE, spec.HeadDim)
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, p := range ps {
		total += p.Tokens()
	}
	H, rb := spec.KVHeads, spec.HeadDim*spec.DType.Size()
	at := func(h, tok int) int {
		if d.Layout == LayoutContiguous {
			return (h*total + tok) * rb
		}
		blk := int(d.BlockTable[tok/d.BlockSize])
		return ((blk*d.BlockSize+tok%d.BlockSize)*H + h) * rb
	}
	row := 0
	for i, p := range ps {
		n := p.Tokens()
		for l := range spec.Layers {
			k := make([]byte, len(p.Layers[l].K))
			if err := reconstruct.Shift(k, p.Layers[l].K, spec.DType, r, H, n, offsets[i]); err != nil {
				t.Fatal(err)
			}
			for h := range H {
				for j := range n {
					src := (h*n + j) * rb
					copy(d.K[l][at(h, row+j):], k[src:src+rb])
					copy(d.V[l][at(h, row+j):], p.Layers[l].V[src:src+rb])
				}
			}
		}
		row += n
	}
}

// putAll stores ps and returns their ids.
func putAll(t *testing.T, db *DB, ps []*Packet) []format.PacketID {
	t.Helper()
	ids := make([]format.PacketID, len(ps))
	for i, p := range ps {
		id, err := db.Put(context.Background(), p)
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = id
	}
	return ids
}

func diffDest(t *testing.T, got, want *Dest) {
	t.Helper()
	for l := range want.K {
		for _, kv := range []struct {
			name      string
			got, want []byte
		}{{"K", got.K[l], want.K[l]}, {"V", got.V[l], want.V[l]}} {
			if i := firstDiff(kv.got, kv.want); i >= 0 {
				t.Fatalf("layer %d %s: byte %d is %#x, reference %#x", l, kv.name, i, kv.got[i], kv.want[i])
			}
		}
	}
}

func firstDiff(a, b []byte) int {
	if len(a) != len(b) {
		return min(len(a), len(b))
	}
	for i := range a {
		if a[i] != b[i] {
			return i
		}
	}
	return -1
}

var assembleSpecs = []struct {
	name string
	spec *format.ModelSpec
}{
	{"bf16-half", testSpec(format.DTypeBF16, 3, 2, 32)},
	{"f32-interleaved-partial", &format.ModelSpec{Architecture: "test", Layers: 2, KVHeads: 3, HeadDim: 12, DType: format.DTypeF32,
		RoPE: format.RoPE{Style: format.RoPEInterleaved, RotaryDims: 8, Theta: 10000}, WeightsID: "w"}},
	{"f16-llama3", &format.ModelSpec{Architecture: "test", Layers: 2, KVHeads: 1, HeadDim: 16, DType: format.DTypeF16,
		RoPE: format.RoPE{Style: format.RoPERotateHalf, Theta: 500000, Scaling: format.RoPEScalingLlama3,
			Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OriginalMaxPos: 8192}, WeightsID: "w"}},
}

// TestAssembleMatchesReference assembles three packets (adapter rows on
// one, offsets consecutive, then overlapping and out of order) into both
// layouts on every read path, with one and several workers, and compares
// every byte with referenceAssemble.
func TestAssembleMatchesReference(t *testing.T) {
	for _, k := range storeKinds {
		for _, sc := range assembleSpecs {
			t.Run(k.name+"/"+sc.name, func(t *testing.T) {
				db, _, _ := openKind(t, k.disk, k.noMmap)
				defer db.Close()
				ps := []*Packet{
					floatPacket(sc.spec, "ns", 7, 0, 0, 1),
					floatPacket(sc.spec, "ns", 5, 2, 3, 2),
					floatPacket(sc.spec, "ns", 11, 0, 0, 3),
				}
				ids := putAll(t, db, ps)
				const total = 7 + (2 + 5 + 3) + 11
				for _, offsets := range [][]int64{{0, 7, 17}, {100, 3, 3}, {0, 0, 0}} {
					items := make([]AssembleItem, len(ps))
					for i := range ps {
						items[i] = AssembleItem{ID: ids[i], Offset: offsets[i]}
					}
					for _, layout := range []string{"contiguous", "paged-4", "paged-1"} {
						for _, workers := range []int{1, 3} {
							name := fmt.Sprintf("offsets %v %s workers %d", offsets, layout, workers)
							var d *Dest
							switch layout {
							case "contiguous":
								d = NewContiguousDest(sc.spec, total)
							case "paged-4":
								d = pagedDest(sc.spec, total, 4, 1)
							default:
								d = pagedDest(sc.spec, total, 1, 2)
							}
							want := cloneDest(d)
							referenceAssemble(t, sc.spec, ps, offsets, want)
							if err := db.Assemble(context.Background(), "ns", sc.spec.Fingerprint(), items, d, &AssembleOptions{Workers: workers}); err != nil {
								t.Fatalf("%s: %v", name, err)
							}
							t.Run(name, func(t *testing.T) { diffDest(t, d, want) })
						}
					}
				}
			})
		}
	}
}

// TestAssembleLayerCallback checks that layers are reported 0..L-1, each
// complete when reported, with several workers racing ahead.
func TestAssembleLayerCallback(t *testing.T) {
	spec := testSpec(format.DTypeBF16, 6, 2, 16)
	for _, layout := range []string{"contiguous", "paged"} {
		t.Run(layout, func(t *testing.T) {
			db := openMem(t, vfs.NewMem(), nil)
			defer db.Close()
			ps := []*Packet{floatPacket(spec, "ns", 30, 0, 0, 1), floatPacket(spec, "ns", 9, 1, 1, 2)}
			ids := putAll(t, db, ps)
			d := NewContiguousDest(spec, 41)
			if layout == "paged" {
				d = pagedDest(spec, 41, 8, 3)
			}
			want := cloneDest(d)
			referenceAssemble(t, spec, ps, []int64{0, 30}, want)
			var order []int
			o := &AssembleOptions{Workers: 4, OnLayer: func(l int) error {
				order = append(order, l)
				if !bytes.Equal(d.K[l], want.K[l]) || !bytes.Equal(d.V[l], want.V[l]) {
					return fmt.Errorf("layer %d reported before it was complete", l)
				}
				return nil
			}}
			items := []AssembleItem{{ids[0], 0}, {ids[1], 30}}
			if err := db.Assemble(context.Background(), "ns", spec.Fingerprint(), items, d, o); err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(order) != "[0 1 2 3 4 5]" {
				t.Fatalf("layers reported in order %v", order)
			}
		})
	}
}

func TestAssembleCallbackErrorStops(t *testing.T) {
	spec := testSpec(format.DTypeBF16, 5, 1, 8)
	db := openMem(t, vfs.NewMem(), nil)
	defer db.Close()
	ids := putAll(t, db, []*Packet{floatPacket(spec, "ns", 4, 0, 0, 1)})
	stop := errors.New("server busy")
	var calls []int
	err := db.Assemble(context.Background(), "ns", spec.Fingerprint(), []AssembleItem{{ids[0], 0}}, NewContiguousDest(spec, 4),
		&AssembleOptions{OnLayer: func(l int) error {
			calls = append(calls, l)
			if l == 2 {
				return stop
			}
			return nil
		}})
	if !errors.Is(err, stop) || !strings.Contains(err.Error(), "layer 2") {
		t.Fatalf("Assemble: %v, want the callback's error for layer 2", err)
	}
	if fmt.Sprint(calls) != "[0 1 2]" {
		t.Fatalf("callback called for %v after its error", calls)
	}
}

func TestAssembleLookupErrors(t *testing.T) {
	spec := testSpec(format.DTypeBF16, 2, 1, 8)
	other := testSpec(format.DTypeF32, 2, 1, 8)
	db := openMem(t, vfs.NewMem(), nil)
	defer db.Close()
	ids := putAll(t, db, []*Packet{floatPacket(spec, "ns", 4, 0, 0, 1), floatPacket(other, "ns", 4, 0, 0, 2)})
	fp := spec.Fingerprint()
	cases := []struct {
		name  string
		ns    string
		items []AssembleItem
		want  error
	}{
		{"unknown packet", "ns", []AssembleItem{{ids[0], 0}, {format.PacketID{1}, 4}}, ErrNotFound},
		{"other namespace", "elsewhere", []AssembleItem{{ids[0], 0}}, ErrNotFound},
		{"other model", "ns", []AssembleItem{{ids[0], 0}, {ids[1], 4}}, ErrModelMismatch},
		{"no items", "ns", nil, ErrInvalidArgument},
		{"negative offset", "ns", []AssembleItem{{ids[0], -1}}, ErrInvalidArgument},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := db.Assemble(context.Background(), c.ns, fp, c.items, NewContiguousDest(spec, 8), nil)
			if !errors.Is(err, c.want) {
				t.Fatalf("Assemble: %v, want %v", err, c.want)
			}
		})
	}
	if s := db.Stats(); s.OpenViews != 0 {
		t.Fatalf("failed assemblies left %d views open", s.OpenViews)
	}
}

func TestAssembleBadDest(t *testing.T) {
	spec := testSpec(format.DTypeBF16, 2, 2, 8)
	db := openMem(t, vfs.NewMem(), nil)
	defer db.Close()
	ids := putAll(t, db, []*Packet{floatPacket(spec, "ns", 10, 0, 0, 1)})
	a, err := db.PrepareAssemble(context.Background(), "ns", spec.Fingerprint(), []AssembleItem{{ids[0], 5}})
	if err != nil {
		t.Fatal(err)
	}
	if a.Tokens() != 10 || a.Packets()[0].Row != 0 || a.Packets()[0].Offset != 5 {
		t.Fatalf("assembly of %d tokens, packets %+v", a.Tokens(), a.Packets())
	}
	cases := []struct {
		name string
		edit func(d *Dest)
	}{
		{"nil", nil},
		{"too few layers", func(d *Dest) { d.K, d.V = d.K[:1], d.V[:1] }},
		{"short K", func(d *Dest) { d.K[1] = d.K[1][:len(d.K[1])-1] }},
		{"long V", func(d *Dest) { d.V[0] = append(d.V[0], 0) }},
		{"K is V", func(d *Dest) { d.K[1] = d.V[1] }},
		{"overlap", func(d *Dest) { d.K[0] = d.V[0][:len(d.K[0])] }},
		{"unknown layout", func(d *Dest) { d.Layout = 7 }},
		{"paged block size 0", func(d *Dest) { d.BlockSize = 0 }},
		{"paged short table", func(d *Dest) { d.BlockTable = d.BlockTable[:2] }},
		{"paged block out of range", func(d *Dest) { d.BlockTable[1] = 6 }},
		{"paged negative block", func(d *Dest) { d.BlockTable[0] = -1 }},
		{"paged duplicate block", func(d *Dest) { d.BlockTable[2] = d.BlockTable[0] }},
		{"paged partial block", func(d *Dest) { d.V[1] = d.V[1][:len(d.V[1])-16] }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var d *Dest
			if c.edit != nil {
				d = NewContiguousDest(spec, 10)
				if strings.HasPrefix(c.name, "paged") {
					d = pagedDest(spec, 10, 4, 1) // 3 blocks used of 6
				}
				c.edit(d)
			}
			if err := a.Run(context.Background(), d, nil); !errors.Is(err, ErrInvalidArgument) {
				t.Fatalf("Run: %v, want ErrInvalidArgument", err)
			}
		})
	}
	if err := a.Run(context.Background(), NewContiguousDest(spec, 10), &AssembleOptions{Workers: -1}); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("negative workers: %v", err)
	}
	a.Release()
	a.Release()
	if err := a.Run(context.Background(), NewContiguousDest(spec, 10), nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("Run after Release: %v, want ErrClosed", err)
	}
	if s := db.Stats(); s.OpenViews != 0 {
		t.Fatalf("released assembly left %d views open", s.OpenViews)
	}
}

// TestAssembleCorruptChunk flips a byte of one chunk: the assembly fails
// with a ChunkError naming it, before the layer is reported, on every read
// path; with checksums off the flipped bytes come through.
func TestAssembleCorruptChunk(t *testing.T) {
	for _, k := range storeKinds {
		t.Run(k.name, func(t *testing.T) {
			db, fs, dir := openKind(t, k.disk, k.noMmap)
			spec := testSpec(format.DTypeBF16, 3, 2, 8)
			p := floatPacket(spec, "ns", 40, 0, 0, 1)
			ids := putAll(t, db, []*Packet{p})
			v, err := db.Get(context.Background(), "ns", spec.Fingerprint(), ids[0])
			if err != nil {
				t.Fatal(err)
			}
			h, path := v.Header(), view.File(v.in).Path()
			v.Release()
			db.Close()
			bad := h.Chunks[2] // layer 1 K
			flipByte(t, fs, path, bad.Offset+bad.Length-3)

			for _, off := range []bool{false, true} {
				db, err := Open(dir, &Options{FS: fs, DisableMmap: k.noMmap, DisableChecksums: off})
				if err != nil {
					t.Fatal(err)
				}
				var reported []int
				o := &AssembleOptions{Workers: 1, OnLayer: func(l int) error { reported = append(reported, l); return nil }}
				d := NewContiguousDest(spec, 40)
				err = db.Assemble(context.Background(), "ns", spec.Fingerprint(), []AssembleItem{{ids[0], 9}}, d, o)
				if off {
					want := NewContiguousDest(spec, 40)
					referenceAssemble(t, spec, []*Packet{p}, []int64{9}, want)
					if err != nil || bytes.Equal(d.K[1], want.K[1]) || !bytes.Equal(d.K[2], want.K[2]) {
						t.Fatalf("checksums off: %v, or the flip did not come through alone", err)
					}
				} else {
					var ce *ChunkError
					if !errors.Is(err, ErrCorruption) || !errors.As(err, &ce) || ce.Layer != 1 || ce.Kind != format.ChunkK || ce.Offset != bad.Offset {
						t.Fatalf("Assemble over a flipped byte: %v, want a ChunkError for layer 1 K", err)
					}
					if len(reported) > 1 || len(reported) == 1 && reported[0] != 0 {
						t.Fatalf("layers %v reported, want at most layer 0", reported)
					}
					if s := db.Stats(); s.Corruptions != 1 || s.OpenViews != 0 {
						t.Fatalf("stats: %d corruptions, %d open views", s.Corruptions, s.OpenViews)
					}
				}
				db.Close()
			}
		})
	}
}

// TestAssembleCorruptEveryPlacement flips one byte in the middle of a
// chunk (layer 1 V, then layer 0 K) and assembles into each placement that
// checksums as it copies or rotates: contiguous with offset 0 (values and
// keys copied with crc32c.Copy) and 9 (keys rotated), paged likewise (rows
// copied, keys rotated at the block stride), on every read path. Each must
// fail with a ChunkError naming the flipped chunk, and the chunk must not
// be remembered as verified: a second Assemble fails the same way.
func TestAssembleCorruptEveryPlacement(t *testing.T) {
	spec := testSpec(format.DTypeBF16, 3, 2, 32) // chunks of 2*40*64 bytes: the kernels' sizes
	for _, k := range storeKinds {
		for _, ci := range []int{3, 0} {
			t.Run(fmt.Sprintf("%s/chunk-%d", k.name, ci), func(t *testing.T) {
				db, fs, dir := openKind(t, k.disk, k.noMmap)
				p := floatPacket(spec, "ns", 40, 0, 0, 1)
				ids := putAll(t, db, []*Packet{p})
				v, err := db.Get(context.Background(), "ns", spec.Fingerprint(), ids[0])
				if err != nil {
					t.Fatal(err)
				}
				h, path := v.Header(), view.File(v.in).Path()
				v.Release()
				db.Close()
				bad := h.Chunks[ci]
				flipByte(t, fs, path, bad.Offset+bad.Length/2+1)
				db, err = Open(dir, &Options{FS: fs, DisableMmap: k.noMmap})
				if err != nil {
					t.Fatal(err)
				}
				defer db.Close()
				for _, layout := range []string{"contiguous", "paged-4"} {
					for _, off := range []int64{0, 9} {
						for try := range 2 {
							d := NewContiguousDest(spec, 40)
							if layout != "contiguous" {
								d = pagedDest(spec, 40, 4, 3)
							}
							err := db.Assemble(context.Background(), "ns", spec.Fingerprint(), []AssembleItem{{ids[0], off}}, d, &AssembleOptions{Workers: 2})
							var ce *ChunkError
							if !errors.Is(err, ErrCorruption) || !errors.As(err, &ce) || ce.Offset != bad.Offset || ce.Kind != bad.Kind || ce.Layer != bad.Layer {
								t.Fatalf("%s offset %d try %d: Assemble over a flipped byte in chunk %d: %v, want its ChunkError", layout, off, try, ci, err)
							}
						}
					}
				}
			})
		}
	}
}

// TestAssembleConcurrentRuns runs one Assembly into several destinations
// at once (for -race) and checks them all.
func TestAssembleConcurrentRuns(t *testing.T) {
	spec := testSpec(format.DTypeF32, 2, 2, 8)
	db, _, _ := openKind(t, true, false)
	defer db.Close()
	ps := []*Packet{floatPacket(spec, "ns", 12, 0, 0, 1), floatPacket(spec, "ns", 3, 0, 0, 2)}
	ids := putAll(t, db, ps)
	a, err := db.PrepareAssemble(context.Background(), "ns", spec.Fingerprint(), []AssembleItem{{ids[0], 1}, {ids[1], 13}})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Release()
	want := NewContiguousDest(spec, 15)
	referenceAssemble(t, spec, ps, []int64{1, 13}, want)
	errs := make(chan error, 4)
	dests := make([]*Dest, 4)
	for i := range dests {
		dests[i] = NewContiguousDest(spec, 15)
		go func() { errs <- a.Run(context.Background(), dests[i], &AssembleOptions{Workers: 2}) }()
	}
	for range dests {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range dests {
		diffDest(t, d, want)
	}
}
