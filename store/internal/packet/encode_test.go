package packet

import (
	"bytes"
	"testing"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/prune"
	"github.com/kvstore/kvstore/reconstruct"
)

// TestEncodeRaw: a raw, whole packet at base 0 is written from the
// caller's own buffers, one equal-length chunk per (layer, K|V), with room
// for the put record that measured it only when asked for.
func TestEncodeRaw(t *testing.T) {
	spec := testSpec(3, 2, 8)
	d := randDesc(spec, 5, 2)
	n, err := d.Check()
	if err != nil {
		t.Fatal(err)
	}
	for _, record := range []bool{false, true} {
		e, err := Encode(d, n, spec.Fingerprint(), idOf(d), 9, record)
		if err != nil {
			t.Fatal(err)
		}
		if e.Desc != d || e.Layout.Chunks != 6 || e.Layout.ChunkLen != n || e.Layout.Codecs != nil {
			t.Fatalf("record=%v: extent %+v of desc %p, want desc %p's 6 raw chunks of %d bytes", record, e.Layout, e.Desc, d, n)
		}
		for i := range 6 {
			if c := e.Desc.Chunk(i); &c[0] != &d.Chunk(i)[0] {
				t.Fatalf("chunk %d was copied", i)
			}
		}
		if !record {
			if e.Layout.Prefix != 0 || e.header != nil {
				t.Fatalf("no record: prefix %d, header %v", e.Layout.Prefix, e.header)
			}
			continue
		}
		rec, err := format.EncodePutRecord(9, e.header, spec)
		if err != nil {
			t.Fatal(err)
		}
		if e.Layout.Prefix < uint64(len(rec)) || e.Layout.Prefix%format.ChunkAlignment != 0 {
			t.Fatalf("prefix %d for a record of %d bytes", e.Layout.Prefix, len(rec))
		}
	}
}

// TestEncodePruned: a keep-set compacts every layer to its kept rows, in
// position order, in new buffers, and adds the raw positions chunk; a set
// keeping every row stores the packet whole.
func TestEncodePruned(t *testing.T) {
	spec := testSpec(2, 3, 4)
	d := randDesc(spec, 9, 3)
	keep, err := prune.Random(2, 3, 9, 4, 11)
	if err != nil {
		t.Fatal(err)
	}
	d.Keep = keep
	n, err := d.Check()
	if err != nil {
		t.Fatal(err)
	}
	e, err := Encode(d, n, spec.Fingerprint(), idOf(d), 1, true)
	if err != nil {
		t.Fatal(err)
	}
	q := e.Desc
	if q == d || q.Kept != 4 || q.Chunks() != 5 || e.Layout.Chunks != 5 || d.Kept != 0 {
		t.Fatalf("compacted: kept %d, %d chunks (layout %d); caller's kept %d", q.Kept, q.Chunks(), e.Layout.Chunks, d.Kept)
	}
	if !bytes.Equal(q.Chunk(4), EncodePositions(keep)) || e.Layout.Size(4) != uint64(len(q.Positions)) {
		t.Fatalf("positions chunk %08b (%d bytes laid out), want %08b", q.Chunk(4), e.Layout.Size(4), EncodePositions(keep))
	}
	rb := spec.HeadDim * 2
	for l := range 2 {
		for h := range 3 {
			for j, pos := range keep.Kept(l, h) {
				src, dst := (h*9+int(pos))*rb, (h*4+j)*rb
				if !bytes.Equal(q.Layers[l].K[dst:dst+rb], d.Layers[l].K[src:src+rb]) ||
					!bytes.Equal(q.Layers[l].V[dst:dst+rb], d.Layers[l].V[src:src+rb]) {
					t.Fatalf("layer %d head %d row %d is not position %d's", l, h, j, pos)
				}
			}
		}
	}
	all, err := prune.Random(2, 3, 9, 9, 1)
	if err != nil {
		t.Fatal(err)
	}
	d.Keep = all
	if q := d.Compacted(); q != d {
		t.Fatal("a keep-set keeping every row compacted the packet")
	}
}

// TestEncodeCodec: with a codec, a chunk that encodes smaller is stored
// encoded and one that does not is kept raw, each recorded in the layout;
// the caller's buffers are untouched.
func TestEncodeCodec(t *testing.T) {
	spec := testSpec(2, 2, 16)
	d := randDesc(spec, 32, 4)
	for l := range d.Layers {
		for i := range d.Layers[l].K {
			d.Layers[l].K[i] = byte(i * 151 >> 3) // noise: zstd cannot shrink it
		}
		clear(d.Layers[l].V) // zeros: it can
	}
	d.Codec = format.CodecShuffleZstd
	n, err := d.Check()
	if err != nil {
		t.Fatal(err)
	}
	orig := bytes.Clone(d.Layers[0].K)
	e, err := Encode(d, n, spec.Fingerprint(), idOf(d), 1, false)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		c, size := e.Layout.Codec(i), e.Layout.Size(i)
		if i%2 == 1 && (c != format.CodecShuffleZstd || size >= n) {
			t.Errorf("V chunk %d: codec %v, %d bytes; want shuffle-zstd under %d", i, c, size, n)
		}
		if size != uint64(len(e.Desc.Chunk(i))) {
			t.Errorf("chunk %d laid out as %d bytes, holds %d", i, size, len(e.Desc.Chunk(i)))
		}
	}
	if !bytes.Equal(d.Layers[0].K, orig) || e.Layout.Raw != n {
		t.Fatalf("caller's K changed, or raw length %d, want %d", e.Layout.Raw, n)
	}
}

// TestNormalized: keys at base 0 are stored as given; keys at another base
// are rotated back to 0 into a copy (reconstruct.Shift's result, bit for
// bit), values shared, the caller's keys untouched.
func TestNormalized(t *testing.T) {
	spec := testSpec(2, 2, 8)
	d := randDesc(spec, 4, 5)
	if q, err := d.Normalized(); err != nil || q != d {
		t.Fatalf("base 0: %p, %v; want the desc itself", q, err)
	}
	d.BasePosition = 7
	orig := bytes.Clone(d.Layers[1].K)
	q, err := d.Normalized()
	if err != nil {
		t.Fatal(err)
	}
	r, err := reconstruct.NewRoPE(spec.RoPE, spec.HeadDim)
	if err != nil {
		t.Fatal(err)
	}
	want := make([]byte, len(orig))
	if err := reconstruct.Shift(want, orig, spec.DType, r, spec.KVHeads, 4, -7); err != nil {
		t.Fatal(err)
	}
	switch {
	case !bytes.Equal(q.Layers[1].K, want):
		t.Fatal("keys are not rotated by -BasePosition")
	case !bytes.Equal(d.Layers[1].K, orig) || bytes.Equal(want, orig):
		t.Fatal("caller's keys changed, or the rotation is the identity")
	case &q.Layers[1].V[0] != &d.Layers[1].V[0] || q.BasePosition != 7:
		t.Fatalf("values copied, or base %d not kept", q.BasePosition)
	}
}
