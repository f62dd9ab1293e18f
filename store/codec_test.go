package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store/internal/view"
)

// smoothPacket is floatPacket with KV-like elements (normal, sd 1) that
// shuffle-zstd can compress: most exponents are alike.
func smoothPacket(spec *format.ModelSpec, ns string, tokens, header, trailer int, seed uint64, c format.Codec) *Packet {
	p := floatPacket(spec, ns, tokens, header, trailer, seed)
	rng := rand.New(rand.NewPCG(seed, 0xc0dec))
	f := make([]float32, len(p.Layers[0].K)/spec.DType.Size())
	for l := range p.Layers {
		for _, b := range [][]byte{p.Layers[l].K, p.Layers[l].V} {
			for i := range f {
				f[i] = float32(rng.NormFloat64())
			}
			if err := format.FromF32(b, f, spec.DType); err != nil {
				panic(err)
			}
		}
	}
	p.Codec = c
	return p
}

// codecTolerance is the most a decoded element may differ from the stored
// one for codec c on elements of range span: half a quantization step
// (plus f16 scale rounding), then the dtype's rounding of values up to max.
func codecTolerance(c format.Codec, span, max float64) float64 {
	dt := max * 1.0 / 128 // bf16's relative rounding, the coarsest dtype here
	switch c {
	case format.CodecInt8:
		return span/255 + dt
	case format.CodecInt4:
		return span/15 + dt
	}
	return 0
}

// within checks that got decodes want within codec c's tolerance, and
// bit-exactly for the lossless codecs.
func within(t *testing.T, what string, c format.Codec, dt format.DType, got, want []byte) {
	t.Helper()
	if c == format.CodecRaw || c == format.CodecShuffleZstd {
		if !bytes.Equal(got, want) {
			t.Fatalf("%s: lossless codec %v: first difference at byte %d", what, c, firstDiff(got, want))
		}
		return
	}
	g, w := make([]float32, len(got)/dt.Size()), make([]float32, len(want)/dt.Size())
	if err := format.ToF32(g, got, dt); err != nil {
		t.Fatal(err)
	}
	if err := format.ToF32(w, want, dt); err != nil {
		t.Fatal(err)
	}
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, x := range w {
		lo, hi = min(lo, float64(x)), max(hi, float64(x))
	}
	tol := codecTolerance(c, hi-lo, max(-lo, hi))
	for i := range w {
		if d := math.Abs(float64(g[i] - w[i])); d > tol || math.IsNaN(d) {
			t.Fatalf("%s: %v element %d: %v, stored %v (tolerance %v)", what, c, i, g[i], w[i], tol)
		}
	}
}

var storeCodecs = []format.Codec{format.CodecRaw, format.CodecShuffleZstd, format.CodecInt8, format.CodecInt4}

// TestCodecRoundTrip stores packets under every codec and dtype, reads
// them back through View.Layer (within the codec's bounds, bit-exact for
// the lossless ones) and assembles them into both layouts, comparing every
// byte with the reference assembly of the decoded tensors.
func TestCodecRoundTrip(t *testing.T) {
	for _, k := range storeKinds {
		for _, dt := range []format.DType{format.DTypeF32, format.DTypeF16, format.DTypeBF16} {
			for _, c := range storeCodecs {
				t.Run(fmt.Sprintf("%s/%v/%v", k.name, dt, c), func(t *testing.T) {
					testCodecRoundTrip(t, k.disk, k.noMmap, dt, c)
				})
			}
		}
	}
}

func testCodecRoundTrip(t *testing.T, disk, noMmap bool, dt format.DType, c format.Codec) {
	db, _, _ := openKind(t, disk, noMmap)
	defer db.Close()
	spec := testSpec(dt, 2, 2, 16)
	ps := []*Packet{smoothPacket(spec, "ns", 40, 0, 0, 1, c), smoothPacket(spec, "ns", 9, 2, 3, 2, c)}
	ids := putAll(t, db, ps)
	decoded := make([]*Packet, len(ps))
	for i, id := range ids {
		decoded[i] = decodedBack(t, db, spec, id, ps[i], c)
	}
	const total = 40 + 2 + 9 + 3
	items := []AssembleItem{{ids[0], 5}, {ids[1], 45}}
	for _, d := range []*Dest{NewContiguousDest(spec, total), pagedDest(spec, total, 4, 1)} {
		want := cloneDest(d)
		referenceAssemble(t, spec, decoded, []int64{5, 45}, want)
		if err := db.Assemble(context.Background(), "ns", spec.Fingerprint(), items, d, &AssembleOptions{Workers: 2}); err != nil {
			t.Fatal(err)
		}
		diffDest(t, d, want)
	}
	// One packet alone decodes straight into a contiguous destination.
	d, want := NewContiguousDest(spec, 40), NewContiguousDest(spec, 40)
	referenceAssemble(t, spec, decoded[:1], []int64{7}, want)
	if err := db.Assemble(context.Background(), "ns", spec.Fingerprint(), []AssembleItem{{ids[0], 7}}, d, nil); err != nil {
		t.Fatal(err)
	}
	diffDest(t, d, want)
}

// decodedBack checks the header's codecs and lengths and the decoded layers
// of packet id against p, and returns p with the decoded tensors.
func decodedBack(t *testing.T, db *DB, spec *format.ModelSpec, id format.PacketID, p *Packet, c format.Codec) *Packet {
	t.Helper()
	v, err := db.Get(context.Background(), "ns", spec.Fingerprint(), id)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Release()
	h := v.Header()
	q := *p
	q.Layers = make([]Layer, len(p.Layers))
	encoded := 0
	for i := range h.Chunks {
		ch := &h.Chunks[i]
		if ch.Codec != format.CodecRaw {
			encoded++
			if ch.Codec != c || ch.Length >= ch.RawLength {
				t.Fatalf("chunk %d: codec %v, %d of %d bytes; asked for %v", i, ch.Codec, ch.Length, ch.RawLength, c)
			}
		}
	}
	if c != format.CodecRaw && encoded == 0 {
		t.Fatalf("codec %v: no chunk was stored encoded", c)
	}
	for l := range p.Layers {
		k, val, err := v.Layer(l)
		if err != nil {
			t.Fatal(err)
		}
		within(t, fmt.Sprintf("layer %d K", l), c, spec.DType, k, p.Layers[l].K)
		within(t, fmt.Sprintf("layer %d V", l), c, spec.DType, val, p.Layers[l].V)
		q.Layers[l] = Layer{K: bytes.Clone(k), V: bytes.Clone(val)}
	}
	return &q
}

// TestCodecFallsBackToRaw stores incompressible chunks (random bits) under
// shuffle-zstd: each is kept raw, and reads back exactly.
func TestCodecFallsBackToRaw(t *testing.T) {
	db, _, _ := openKind(t, false, false)
	defer db.Close()
	spec := testSpec(format.DTypeF32, 2, 2, 8)
	p := randPacket(spec, "ns", 30, 1)
	p.Codec = format.CodecShuffleZstd
	ids := putAll(t, db, []*Packet{p})
	v, err := db.Get(context.Background(), "ns", spec.Fingerprint(), ids[0])
	if err != nil {
		t.Fatal(err)
	}
	defer v.Release()
	for i, ch := range v.Header().Chunks {
		if ch.Codec != format.CodecRaw || ch.Length != ch.RawLength {
			t.Fatalf("chunk %d of random bits stored as %v, %d of %d bytes", i, ch.Codec, ch.Length, ch.RawLength)
		}
	}
	k, _, err := v.Layer(1)
	if err != nil || !bytes.Equal(k, p.Layers[1].K) {
		t.Fatalf("layer 1 K: %v, or bytes differ", err)
	}
}

// TestCodecBadOptions refuses an unknown codec and bad codec options
// before writing anything.
func TestCodecBadOptions(t *testing.T) {
	db, _, _ := openKind(t, false, false)
	defer db.Close()
	spec := testSpec(format.DTypeBF16, 1, 1, 8)
	for _, tc := range []struct {
		name string
		mod  func(*Packet)
	}{
		{"unknown codec", func(p *Packet) { p.Codec = 9 }},
		{"group size", func(p *Packet) { p.Codec, p.CodecOptions.GroupSize = format.CodecInt8, -1 }},
		{"scale dtype", func(p *Packet) { p.Codec, p.CodecOptions.ScaleDType = format.CodecInt4, format.DTypeBF16 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := smoothPacket(spec, "ns", 4, 0, 0, 1, format.CodecRaw)
			tc.mod(p)
			if _, err := db.Put(context.Background(), p); !errors.Is(err, ErrInvalidArgument) {
				t.Fatalf("%s: %v, want ErrInvalidArgument", tc.name, err)
			}
		})
	}
	if s := db.Stats(); s.Puts != 0 {
		t.Fatalf("%d packets stored", s.Puts)
	}
}

// TestCodecCorruptChunk flips a byte of a compressed chunk: View.Layer and
// Assemble report ErrCorruption (a ChunkError for that chunk), on every
// read path.
func TestCodecCorruptChunk(t *testing.T) {
	for _, k := range storeKinds {
		for _, c := range storeCodecs[1:] {
			t.Run(k.name+"/"+c.String(), func(t *testing.T) {
				db, fs, dir := openKind(t, k.disk, k.noMmap)
				spec := testSpec(format.DTypeBF16, 2, 2, 16)
				ids := putAll(t, db, []*Packet{smoothPacket(spec, "ns", 64, 0, 0, 1, c)})
				v, err := db.Get(context.Background(), "ns", spec.Fingerprint(), ids[0])
				if err != nil {
					t.Fatal(err)
				}
				bad, path := v.Header().Chunks[2], view.File(v.in).Path()
				v.Release()
				db.Close()
				if bad.Codec != c {
					t.Fatalf("layer 1 K stored as %v", bad.Codec)
				}
				flipByte(t, fs, path, bad.Offset+bad.Length/2)
				db, err = Open(dir, &Options{FS: fs, DisableMmap: k.noMmap, Logger: quiet})
				if err != nil {
					t.Fatal(err)
				}
				defer db.Close()
				v, err = db.Get(context.Background(), "ns", spec.Fingerprint(), ids[0])
				if err != nil {
					t.Fatal(err)
				}
				_, _, err = v.Layer(1)
				v.Release()
				var ce *ChunkError
				if !errors.As(err, &ce) || ce.Layer != 1 || ce.Kind != format.ChunkK {
					t.Fatalf("Layer over a flipped byte: %v", err)
				}
				err = db.Assemble(context.Background(), "ns", spec.Fingerprint(), []AssembleItem{{ids[0], 3}}, NewContiguousDest(spec, 64), nil)
				if !errors.Is(err, ErrCorruption) {
					t.Fatalf("Assemble over a flipped byte: %v", err)
				}
			})
		}
	}
}

// TestCodecVerifyAndCheck stores packets of every codec side by side (the
// extents' chunks of different lengths, some with padding) and runs Verify
// and Check: the trailers' payload CRCs and every chunk's CRC hold.
func TestCodecVerifyAndCheck(t *testing.T) {
	db, _, _ := openKind(t, true, false)
	defer db.Close()
	spec := testSpec(format.DTypeBF16, 3, 2, 12)
	for i, c := range storeCodecs {
		putAll(t, db, []*Packet{smoothPacket(spec, "ns", 33+i, 1, 0, uint64(i), c)})
	}
	v, err := db.Verify(context.Background(), VerifyOptions{})
	if err != nil || !v.OK() || v.Extents != 4 || v.Chunks != 4*6 {
		t.Fatalf("verify: %v, %+v", err, v)
	}
	ch, err := db.Check(context.Background(), CheckOptions{})
	if err != nil || !ch.OK() || ch.Packets != 4 {
		t.Fatalf("check: %v, %+v", err, ch)
	}
}

// TestCodecCompact deletes every other compressed packet and compacts: the
// survivors, moved to a new file, read back as before.
func TestCodecCompact(t *testing.T) {
	db, _, _ := openKind(t, false, false)
	defer db.Close()
	spec := testSpec(format.DTypeBF16, 2, 2, 16)
	var ps []*Packet
	for i := range 8 {
		ps = append(ps, smoothPacket(spec, "ns", 200, 0, 0, uint64(i), storeCodecs[i%4]))
	}
	ids := putAll(t, db, ps)
	want := make([]*Packet, len(ps))
	for i := range ps {
		want[i] = decodedBack(t, db, spec, ids[i], ps[i], storeCodecs[i%4])
		if i%2 == 1 {
			if err := db.Delete(context.Background(), "ns", spec.Fingerprint(), ids[i]); err != nil {
				t.Fatal(err)
			}
		}
	}
	if rep, err := db.Compact(context.Background(), CompactOptions{LiveRatio: 1}); err != nil || rep.BytesCopied == 0 {
		t.Fatalf("compact: %v, %+v", err, rep)
	}
	if rep, err := db.Compact(context.Background(), CompactOptions{LiveRatio: 1}); err != nil || rep.BytesCopied != 0 {
		t.Fatalf("second compact: %v, %+v", err, rep)
	}
	for i := 0; i < len(ps); i += 2 {
		v, err := db.Get(context.Background(), "ns", spec.Fingerprint(), ids[i])
		if err != nil {
			t.Fatal(err)
		}
		for l := range spec.Layers {
			k, val, err := v.Layer(l)
			if err != nil || !bytes.Equal(k, want[i].Layers[l].K) || !bytes.Equal(val, want[i].Layers[l].V) {
				t.Fatalf("packet %d layer %d after compaction: %v, or tensors differ", i, l, err)
			}
		}
		v.Release()
	}
}
