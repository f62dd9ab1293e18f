package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/prune"
	"github.com/kvstore/kvstore/store/internal/bloblog"
	"github.com/kvstore/kvstore/store/internal/packet"
)

// prunedOf returns a copy of p that Put stores pruned to keep.
func prunedOf(p *Packet, keep *prune.Set) *Packet {
	q := *p
	q.Keep = keep
	return &q
}

// scattered returns a raw copy of p whose kept rows (keep) are replaced by
// the rows of v's compacted layers: the whole packet whose pruned assembly
// must equal the stored pruned packet's, whatever codec decoded v's rows.
func scattered(t *testing.T, p *Packet, keep *prune.Set, v *View) *Packet {
	t.Helper()
	m := p.Model
	n, rb := p.Tokens(), m.HeadDim*m.DType.Size()
	k, _ := keep.Rows()
	q := *p
	q.Codec, q.Keep = format.CodecRaw, nil
	q.Layers = make([]Layer, len(p.Layers))
	for l := range p.Layers {
		kk, vv, err := v.Layer(l)
		if err != nil {
			t.Fatal(err)
		}
		q.Layers[l] = Layer{K: bytes.Clone(p.Layers[l].K), V: bytes.Clone(p.Layers[l].V)}
		for h := range m.KVHeads {
			for j, pos := range keep.Kept(l, h) {
				dst, src := (h*n+int(pos))*rb, (h*k+j)*rb
				copy(q.Layers[l].K[dst:dst+rb], kk[src:src+rb])
				copy(q.Layers[l].V[dst:dst+rb], vv[src:src+rb])
			}
		}
	}
	return &q
}

// compactRows returns tensor b ([heads][n][rb bytes]) of layer l reduced to
// keep's rows, as a pruned packet stores it.
func compactRows(b []byte, keep *prune.Set, l, heads, n, rb int) []byte {
	var out []byte
	for h := range heads {
		for _, pos := range keep.Kept(l, h) {
			out = append(out, b[(h*n+int(pos))*rb:(h*n+int(pos)+1)*rb]...)
		}
	}
	return out
}

// assembleInto runs a prepared assembly into a fresh destination like d.
func assembleInto(t *testing.T, a *Assembly, d *Dest) *Dest {
	t.Helper()
	if err := a.Run(context.Background(), d, &AssembleOptions{Workers: 2}); err != nil {
		t.Fatal(err)
	}
	return d
}

// samePositions requires two assemblies to have the same index maps.
func samePositions(t *testing.T, a, b *Assembly, spec *format.ModelSpec) {
	t.Helper()
	for l := range spec.Layers {
		for h := range spec.KVHeads {
			pa, err := a.Positions(l, h)
			if err != nil {
				t.Fatal(err)
			}
			pb, err := b.Positions(l, h)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(pa, pb) {
				t.Fatalf("layer %d head %d positions %v, want %v", l, h, pa, pb)
			}
		}
	}
}

// TestPrunedPacketAssemble stores a packet pruned (raw, shuffle-zstd,
// int8) and assembles it, after a whole packet, into both layouts at
// non-zero offsets: bit for bit what PrepareAssemblePruned makes of the
// whole packet with the same keep-set (its kept rows being the pruned
// packet's decoded ones, which for the lossless codecs are the original
// rows), with the same index map.
func TestPrunedPacketAssemble(t *testing.T) {
	for _, k := range storeKinds {
		for _, c := range []format.Codec{format.CodecRaw, format.CodecShuffleZstd, format.CodecInt8} {
			t.Run(k.name+"/"+c.String(), func(t *testing.T) {
				db, _, _ := openKind(t, k.disk, k.noMmap)
				defer db.Close()
				spec := testSpec(format.DTypeBF16, 2, 3, 16)
				whole := smoothPacket(spec, "ns", 30, 1, 1, 7, c)
				other := smoothPacket(spec, "ns", 6, 0, 0, 8, c)
				keep, err := prune.Random(2, 3, whole.Tokens(), 11, 5)
				if err != nil {
					t.Fatal(err)
				}
				ids := putAll(t, db, []*Packet{prunedOf(whole, keep), other})
				v, err := db.Get(context.Background(), "ns", spec.Fingerprint(), ids[0])
				if err != nil {
					t.Fatal(err)
				}
				defer v.Release()
				checkPrunedView(t, v, whole, keep, c)

				// The reference: the whole packet, raw, in another namespace.
				ref, refOther := scattered(t, whole, keep, v), *other
				ref.Namespace, refOther.Namespace, refOther.Codec = "ref", "ref", format.CodecRaw
				refOther.Layers = decodedBack(t, db, spec, ids[1], other, c).Layers
				refIDs := putAll(t, db, []*Packet{ref, &refOther})
				if ids[0] != format.ComputePacketID("ns", spec.Fingerprint(), whole.AdapterID, whole.TokenIDs) {
					t.Fatal("a pruned packet's id is not its document's")
				}
				offsets := []int64{5, 90}
				a, err := db.PrepareAssemble(context.Background(), "ns", spec.Fingerprint(), []AssembleItem{{ids[0], offsets[0]}, {ids[1], offsets[1]}})
				if err != nil {
					t.Fatal(err)
				}
				defer a.Release()
				b, err := db.PrepareAssemblePruned(context.Background(), "ref", spec.Fingerprint(),
					[]AssembleItem{{refIDs[0], offsets[0]}, {refIDs[1], offsets[1]}}, []*prune.Set{keep, nil})
				if err != nil {
					t.Fatal(err)
				}
				defer b.Release()
				total := 11 + 6
				if a.Tokens() != total || a.Packets()[0].Tokens != 11 || a.Packets()[1].Row != 11 || a.Packets()[0].Keep == nil {
					t.Fatalf("tokens %d, packets %+v", a.Tokens(), a.Packets())
				}
				for _, d := range []*Dest{NewContiguousDest(spec, total), pagedDest(spec, total, 4, 3)} {
					want := assembleInto(t, b, cloneDest(d))
					diffDest(t, assembleInto(t, a, d), want)
				}
				samePositions(t, a, b, spec)

				// Alone, at an offset: the contiguous single-packet path.
				one, err := db.PrepareAssemble(context.Background(), "ns", spec.Fingerprint(), []AssembleItem{{ids[0], 3}})
				if err != nil {
					t.Fatal(err)
				}
				defer one.Release()
				oneRef, err := db.PrepareAssemblePruned(context.Background(), "ref", spec.Fingerprint(), []AssembleItem{{refIDs[0], 3}}, []*prune.Set{keep})
				if err != nil {
					t.Fatal(err)
				}
				defer oneRef.Release()
				for _, d := range []*Dest{NewContiguousDest(spec, 11), pagedDest(spec, 11, 3, 4)} {
					want := assembleInto(t, oneRef, cloneDest(d))
					diffDest(t, assembleInto(t, one, d), want)
				}
			})
		}
	}
}

// checkPrunedView checks a pruned packet's header, its kept positions and
// its compacted layers against the whole packet it was cut from.
func checkPrunedView(t *testing.T, v *View, whole *Packet, keep *prune.Set, c format.Codec) {
	t.Helper()
	spec := whole.Model
	h := v.Header()
	k, _ := keep.Rows()
	if !v.Pruned() || h.KeptTokens != uint32(k) || h.Tokens != uint32(whole.Tokens()) || len(h.Chunks) != 2*spec.Layers+1 {
		t.Fatalf("header: pruned %v, kept %d of %d, %d chunks", v.Pruned(), h.KeptTokens, h.Tokens, len(h.Chunks))
	}
	for i := range 2 * spec.Layers {
		if ch := h.Chunks[i]; ch.Shape[1] != uint32(k) || (c != format.CodecRaw && ch.Codec != c) {
			t.Fatalf("chunk %d: shape %v, codec %v; want %d rows under %v", i, ch.Shape, ch.Codec, k, c)
		}
	}
	got, err := v.Keep()
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.Keep, keep.Keep) || got.Tokens != keep.Tokens {
		t.Fatalf("Keep() = %+v, want %+v", got, keep)
	}
	rb := spec.HeadDim * spec.DType.Size()
	for l := range spec.Layers {
		kk, vv, err := v.Layer(l)
		if err != nil {
			t.Fatal(err)
		}
		wantK := compactRows(whole.Layers[l].K, keep, l, spec.KVHeads, whole.Tokens(), rb)
		wantV := compactRows(whole.Layers[l].V, keep, l, spec.KVHeads, whole.Tokens(), rb)
		within(t, fmt.Sprintf("layer %d K", l), c, spec.DType, kk, wantK)
		within(t, fmt.Sprintf("layer %d V", l), c, spec.DType, vv, wantV)
	}
}

// TestPrunedPacketSelect assembles a stored pruned packet with a keep-set
// that selects from its stored rows (equal to the whole packet assembled
// with that set), and refuses one keeping a row it did not store.
func TestPrunedPacketSelect(t *testing.T) {
	db, _, _ := openKind(t, false, false)
	defer db.Close()
	spec := testSpec(format.DTypeF16, 2, 2, 8)
	whole := floatPacket(spec, "ns", 12, 0, 0, 3)
	keep, err := prune.Random(2, 2, 12, 6, 1)
	if err != nil {
		t.Fatal(err)
	}
	sub := &prune.Set{Layers: 2, KVHeads: 2, Tokens: 12, Keep: make([][]int32, 4)}
	for g, list := range keep.Keep {
		sub.Keep[g] = []int32{list[1], list[3], list[4]}
	}
	ids := putAll(t, db, []*Packet{prunedOf(whole, keep)})
	ref := *whole
	ref.Namespace = "ref"
	refIDs := putAll(t, db, []*Packet{&ref})
	a, err := db.PrepareAssemblePruned(context.Background(), "ns", spec.Fingerprint(), []AssembleItem{{ids[0], 7}}, []*prune.Set{sub})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Release()
	b, err := db.PrepareAssemblePruned(context.Background(), "ref", spec.Fingerprint(), []AssembleItem{{refIDs[0], 7}}, []*prune.Set{sub})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Release()
	for _, d := range []*Dest{NewContiguousDest(spec, 3), pagedDest(spec, 3, 2, 5)} {
		want := assembleInto(t, b, cloneDest(d))
		diffDest(t, assembleInto(t, a, d), want)
	}
	samePositions(t, a, b, spec)

	bad := &prune.Set{Layers: 2, KVHeads: 2, Tokens: 12, Keep: slices.Clone(sub.Keep)}
	missing := int32(0)
	for slices.Contains(keep.Keep[3], missing) {
		missing++ // 6 of 12 are kept: one of 0..6 is not
	}
	bad.Keep[3] = append(slices.Clone(sub.Keep[3][:2]), missing)
	slices.Sort(bad.Keep[3])
	if _, err := db.PrepareAssemblePruned(context.Background(), "ns", spec.Fingerprint(), []AssembleItem{{ids[0], 0}}, []*prune.Set{bad}); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("keep-set with a row not stored: %v, want ErrInvalidArgument", err)
	}
	if s := db.Stats(); s.OpenViews != 2 {
		t.Fatalf("%d views open, want the two assemblies'", s.OpenViews)
	}
}

// TestPrunedPacketBytes: a packet keeping a quarter of its rows stores
// about a quarter of the bytes (its K|V chunks exactly k/N of the whole
// ones, plus the positions chunk), and reads back the same after a
// reopen.
func TestPrunedPacketBytes(t *testing.T) {
	for _, k := range storeKinds[1:] { // on disk: reopened from the files
		t.Run(k.name, func(t *testing.T) {
			db, fs, dir := openKind(t, k.disk, k.noMmap)
			spec := testSpec(format.DTypeBF16, 4, 4, 64)
			whole := floatPacket(spec, "ns", 256, 0, 0, 9)
			keep, err := prune.Random(4, 4, 256, prune.Budget(256, 0.25), 2)
			if err != nil {
				t.Fatal(err)
			}
			wholeRef := *whole
			wholeRef.Namespace = "whole"
			ids := putAll(t, db, []*Packet{prunedOf(whole, keep), &wholeRef})
			hp, hw := header(t, db, "ns", spec, ids[0]), header(t, db, "whole", spec, ids[1])
			pos := hp.Chunks[hp.PositionsChunk()]
			for i := range 2 * spec.Layers {
				if got, want := hp.Chunks[i].Length*256, hw.Chunks[i].Length*64; got != want {
					t.Fatalf("chunk %d: %d bytes, whole %d: not 64/256 of it", i, hp.Chunks[i].Length, hw.Chunks[i].Length)
				}
			}
			// The positions bitmap: 256/8 bytes per (layer, head), whatever k.
			if pos.Length != 4*4*256/8 || pos.DType != format.DTypeU8 {
				t.Fatalf("positions chunk of %d %v bytes, want 512 u8", pos.Length, pos.DType)
			}
			// 8 chunks of 4 x 64 x 64 bf16 = 32,768 bytes each (a quarter of
			// the whole ones), the 512-byte bitmap, the trailer: 266,240 bytes.
			if hw.ExtentLength != 1_052_672 || hp.ExtentLength != 266_240 {
				t.Fatalf("pruned extent %d bytes, whole %d; want 266240 and 1052672", hp.ExtentLength, hw.ExtentLength)
			}
			t.Logf("whole %d bytes, a quarter kept %d bytes (%.3f)", hw.ExtentLength, hp.ExtentLength, float64(hp.ExtentLength)/float64(hw.ExtentLength))
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			db, err = Open(dir, &Options{FS: fs, DisableMmap: k.noMmap, Logger: quiet})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			v, err := db.Get(context.Background(), "ns", spec.Fingerprint(), ids[0])
			if err != nil {
				t.Fatal(err)
			}
			defer v.Release()
			checkPrunedView(t, v, whole, keep, format.CodecRaw)
			rep, err := db.Verify(context.Background(), VerifyOptions{})
			if err != nil || !rep.OK() || rep.Chunks != int64(2*spec.Layers+1+2*spec.Layers) {
				t.Fatalf("Verify: %+v, %v", rep, err)
			}
		})
	}
}

// header returns packet id's header.
func header(t *testing.T, db *DB, ns string, spec *format.ModelSpec, id format.PacketID) *format.PacketHeader {
	t.Helper()
	v, err := db.Get(context.Background(), ns, spec.Fingerprint(), id)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Release()
	return v.Header()
}

// TestPrunedPositionsCorrupt flips a byte of a pruned packet's positions
// chunk: Verify reports the chunk, View.Keep and Assemble refuse it with
// ErrCorruption, and the K|V chunks still read.
func TestPrunedPositionsCorrupt(t *testing.T) {
	for _, k := range storeKinds {
		t.Run(k.name, func(t *testing.T) {
			db, fs, dir := openKind(t, k.disk, k.noMmap)
			spec := testSpec(format.DTypeBF16, 2, 2, 8)
			whole := floatPacket(spec, "ns", 10, 0, 0, 4)
			keep, err := prune.Random(2, 2, 10, 4, 3)
			if err != nil {
				t.Fatal(err)
			}
			ids := putAll(t, db, []*Packet{prunedOf(whole, keep)})
			h := header(t, db, "ns", spec, ids[0])
			path := db.fs.PathJoin(db.w.Dir, bloblog.FileName(h.BlobFile))
			db.Close()
			pos := h.Chunks[h.PositionsChunk()]
			flipByte(t, fs, path, pos.Offset+5)

			db, err = Open(dir, &Options{FS: fs, DisableMmap: k.noMmap, Logger: quiet})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			rep, err := db.Verify(context.Background(), VerifyOptions{})
			if err != nil || len(rep.Findings) != 1 {
				t.Fatalf("Verify: %+v, %v", rep, err)
			}
			if f := rep.Findings[0]; f.Kind != FindingChunkCRC || f.Chunk != format.ChunkPositions || f.Offset != pos.Offset {
				t.Fatalf("finding %v does not name the positions chunk", f)
			}
			v, err := db.Get(context.Background(), "ns", spec.Fingerprint(), ids[0])
			if err != nil {
				t.Fatal(err)
			}
			defer v.Release()
			var ce *ChunkError
			if _, err := v.Keep(); !errors.As(err, &ce) || ce.Kind != format.ChunkPositions {
				t.Fatalf("Keep: %v, want a ChunkError for the positions", err)
			}
			if _, _, err := v.Layer(1); err != nil {
				t.Fatalf("Layer: %v", err)
			}
			if _, err := db.PrepareAssemble(context.Background(), "ns", spec.Fingerprint(), []AssembleItem{{ids[0], 0}}); !errors.Is(err, ErrCorruption) {
				t.Fatalf("PrepareAssemble: %v, want ErrCorruption", err)
			}
		})
	}
}

// TestPrunedOddTokens stores pruned packets whose token count is not a
// multiple of 8 (and one that is): the bitmap chunk is exactly
// layers x heads x ceil(tokens/8) bytes, its padding bits zero, and Keep
// reads the set back.
func TestPrunedOddTokens(t *testing.T) {
	db, _, _ := openKind(t, false, false)
	defer db.Close()
	spec := testSpec(format.DTypeBF16, 2, 3, 4)
	for i, n := range []int{2, 9, 16, 23} {
		whole := floatPacket(spec, fmt.Sprintf("ns%d", i), n, 0, 0, uint64(20+i))
		keep, err := prune.Random(2, 3, n, n/2, uint64(i))
		if err != nil {
			t.Fatal(err)
		}
		ids := putAll(t, db, []*Packet{prunedOf(whole, keep)})
		v, err := db.Get(context.Background(), whole.Namespace, spec.Fingerprint(), ids[0])
		if err != nil {
			t.Fatal(err)
		}
		h := v.Header()
		if pos := h.Chunks[h.PositionsChunk()]; pos.Length != uint64(2*3*((n+7)/8)) {
			t.Errorf("n=%d: positions chunk of %d bytes, want %d", n, pos.Length, 2*3*((n+7)/8))
		}
		b, err := v.Chunk(h.PositionsChunk())
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(b, packet.EncodePositions(keep)) {
			t.Errorf("n=%d: stored bitmap %08b, want %08b", n, b, packet.EncodePositions(keep))
		}
		checkPrunedView(t, v, whole, keep, format.CodecRaw)
		v.Release()
	}
}

// TestPrunedPut covers Put's keep-set rules: sets that do not fit are
// ErrInvalidArgument, one keeping every row stores the packet whole, and a
// document already stored stays as it was first stored.
func TestPrunedPut(t *testing.T) {
	db, _, _ := openKind(t, false, false)
	defer db.Close()
	spec := testSpec(format.DTypeBF16, 1, 2, 8)
	p := floatPacket(spec, "ns", 5, 0, 0, 1)
	for _, tc := range []struct {
		name string
		keep *prune.Set
	}{
		{"ragged", &prune.Set{Layers: 1, KVHeads: 2, Tokens: 5, Keep: [][]int32{{0, 1}, {2}}}},
		{"tokens", &prune.Set{Layers: 1, KVHeads: 2, Tokens: 6, Keep: [][]int32{{0}, {2}}}},
		{"heads", &prune.Set{Layers: 1, KVHeads: 1, Tokens: 5, Keep: [][]int32{{0}}}},
		{"layers", &prune.Set{Layers: 2, KVHeads: 2, Tokens: 5, Keep: [][]int32{{0}, {1}, {2}, {3}}}},
		{"invalid", &prune.Set{Layers: 1, KVHeads: 2, Tokens: 5, Keep: [][]int32{{1, 0}, {2, 3}}}},
		{"empty", &prune.Set{Layers: 1, KVHeads: 2, Tokens: 5, Keep: [][]int32{{}, {}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := db.Put(context.Background(), prunedOf(p, tc.keep)); !errors.Is(err, ErrInvalidArgument) {
				t.Errorf("%s: Put = %v, want ErrInvalidArgument", tc.name, err)
			}
		})
	}
	all := &prune.Set{Layers: 1, KVHeads: 2, Tokens: 5, Keep: [][]int32{{0, 1, 2, 3, 4}, {0, 1, 2, 3, 4}}}
	id, err := db.Put(context.Background(), prunedOf(p, all))
	if err != nil {
		t.Fatal(err)
	}
	if h := header(t, db, "ns", spec, id); h.Pruned() || len(h.Chunks) != 2 {
		t.Fatalf("a set keeping every row stored %d chunks, kept %d", len(h.Chunks), h.KeptTokens)
	}
	some := &prune.Set{Layers: 1, KVHeads: 2, Tokens: 5, Keep: [][]int32{{0, 3}, {1, 4}}}
	if id2, err := db.Put(context.Background(), prunedOf(p, some)); err != nil || id2 != id {
		t.Fatalf("Put of a pruned variant: %s, %v", id2.Short(), err)
	}
	if h := header(t, db, "ns", spec, id); h.Pruned() {
		t.Fatal("a pruned variant replaced the whole packet stored first")
	}
	if s := db.Stats(); s.PutsDeduped != 1 {
		t.Fatalf("%d puts deduped, want 1", s.PutsDeduped)
	}
}

// TestPrunedBasePosition: keys given at a base position are normalised
// before they are stored, the kept ones exactly as the whole packet's.
func TestPrunedBasePosition(t *testing.T) {
	db, _, _ := openKind(t, false, false)
	defer db.Close()
	spec := testSpec(format.DTypeBF16, 2, 2, 8)
	whole := floatPacket(spec, "ns", 9, 1, 0, 5)
	whole.BasePosition = 40
	keep, err := prune.Random(2, 2, 10, 3, 8)
	if err != nil {
		t.Fatal(err)
	}
	ref := *whole
	ref.Namespace = "ref"
	ids := putAll(t, db, []*Packet{prunedOf(whole, keep), &ref})
	vp, err := db.Get(context.Background(), "ns", spec.Fingerprint(), ids[0])
	if err != nil {
		t.Fatal(err)
	}
	defer vp.Release()
	vw, err := db.Get(context.Background(), "ref", spec.Fingerprint(), ids[1])
	if err != nil {
		t.Fatal(err)
	}
	defer vw.Release()
	rb := spec.HeadDim * spec.DType.Size()
	for l := range spec.Layers {
		pk, pv, err := vp.Layer(l)
		if err != nil {
			t.Fatal(err)
		}
		wk, wv, err := vw.Layer(l)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(pk, compactRows(wk, keep, l, 2, 10, rb)) || !bytes.Equal(pv, compactRows(wv, keep, l, 2, 10, rb)) {
			t.Fatalf("layer %d: pruned rows differ from the whole packet's normalised rows", l)
		}
	}
	if vp.Header().BasePosition != 40 {
		t.Fatalf("base position %d", vp.Header().BasePosition)
	}
}

// TestPrunedCompactAndCheck: compaction moves a pruned packet's extent,
// positions chunk included; Check and Verify stay clean and the packet
// assembles as before.
func TestPrunedCompactAndCheck(t *testing.T) {
	db, _, _ := openKind(t, true, false)
	defer db.Close()
	spec := testSpec(format.DTypeBF16, 2, 2, 8)
	whole := smoothPacket(spec, "ns", 40, 0, 0, 6, format.CodecShuffleZstd)
	keep, err := prune.Random(2, 2, 40, 10, 4)
	if err != nil {
		t.Fatal(err)
	}
	// Fillers of 128 KiB each: the pruned packet's blob file is sealed.
	var filler []*Packet
	for i := range 3 {
		filler = append(filler, randPacket(spec, "ns", 1000, uint64(100+i)))
	}
	fids := putAll(t, db, filler[:1])
	ids := putAll(t, db, []*Packet{prunedOf(whole, keep)})
	putAll(t, db, filler[1:])
	if err := db.Delete(context.Background(), "ns", spec.Fingerprint(), fids[0]); err != nil {
		t.Fatal(err)
	}
	assembled := func() *Dest {
		a, err := db.PrepareAssemble(context.Background(), "ns", spec.Fingerprint(), []AssembleItem{{ids[0], 11}})
		if err != nil {
			t.Fatal(err)
		}
		defer a.Release()
		return assembleInto(t, a, NewContiguousDest(spec, 10))
	}
	before := assembled()
	hb := header(t, db, "ns", spec, ids[0])
	rep := mustCompact(t, db, CompactOptions{Files: []uint32{hb.BlobFile}})
	if rep.Extents == 0 {
		t.Fatalf("nothing moved: %+v", rep)
	}
	ha := header(t, db, "ns", spec, ids[0])
	if ha.BlobFile == hb.BlobFile || !ha.Pruned() || ha.Chunks[ha.PositionsChunk()].Offset-ha.ExtentOffset != hb.Chunks[hb.PositionsChunk()].Offset-hb.ExtentOffset {
		t.Fatalf("after compaction: %+v", ha)
	}
	diffDest(t, assembled(), before)
	crep, err := db.Check(context.Background(), CheckOptions{})
	if err != nil || !crep.OK() {
		t.Fatalf("Check: %+v, %v", crep, err)
	}
	vrep, err := db.Verify(context.Background(), VerifyOptions{})
	if err != nil || !vrep.OK() {
		t.Fatalf("Verify: %+v, %v", vrep, err)
	}
}

// TestPrunedFlipEveryPayloadBit flips, one at a time, every bit of a pruned
// packet's payload (compacted chunks, padding, positions) on MemFS, where
// every read is verified again: each read then either fails with
// ErrCorruption or returns exactly what was stored (a flip in padding).
func TestPrunedFlipEveryPayloadBit(t *testing.T) {
	mem := vfs.NewMem()
	db := openMem(t, mem, nil)
	defer db.Close()
	spec := testSpec(format.DTypeBF16, 2, 2, 4)
	whole := floatPacket(spec, "ns", 7, 0, 0, 12)
	keep, err := prune.Random(2, 2, 7, 3, 6)
	if err != nil {
		t.Fatal(err)
	}
	ids := putAll(t, db, []*Packet{prunedOf(whole, keep)})
	h := header(t, db, "ns", spec, ids[0])
	buf, err := mem.UnsafeGetFileDataBuffer(db.fs.PathJoin(db.w.Dir, bloblog.FileName(h.BlobFile)))
	if err != nil {
		t.Fatal(err)
	}
	read := func() (*Dest, []int64, error) {
		a, err := db.PrepareAssemble(context.Background(), "ns", spec.Fingerprint(), []AssembleItem{{ids[0], 9}})
		if err != nil {
			return nil, nil, err
		}
		defer a.Release()
		pos, err := a.Positions(1, 1)
		if err != nil {
			return nil, nil, err
		}
		d := NewContiguousDest(spec, 3)
		return d, pos, a.Run(context.Background(), d, &AssembleOptions{Workers: 1})
	}
	want, wantPos, err := read()
	if err != nil {
		t.Fatal(err)
	}
	end := h.Chunks[h.PositionsChunk()].Offset + h.Chunks[h.PositionsChunk()].Length
	detected, harmless := 0, 0
	for bit := 8 * h.ExtentOffset; bit < 8*end; bit++ {
		buf[bit/8] ^= 1 << (bit % 8)
		d, pos, err := read()
		buf[bit/8] ^= 1 << (bit % 8)
		switch {
		case errors.Is(err, ErrCorruption):
			detected++
		case err != nil:
			t.Fatalf("bit %d: %v, want ErrCorruption or the stored tensors", bit-8*h.ExtentOffset, err)
		default:
			diffDest(t, d, want)
			if !reflect.DeepEqual(pos, wantPos) {
				t.Fatalf("bit %d: positions %v, want %v", bit-8*h.ExtentOffset, pos, wantPos)
			}
			harmless++
		}
	}
	t.Logf("%d bits of payload: %d detected, %d harmless (padding)", detected+harmless, detected, harmless)
	if detected < 8*(4*48+4) { // 4 chunks of 48 bytes and a 4-byte bitmap
		t.Fatalf("only %d flips detected", detected)
	}
}
