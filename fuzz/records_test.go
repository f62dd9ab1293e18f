package fuzz

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"github.com/kvstore/kvstore/format"
)

// Fuzz targets for the catalog and blob records coded in format/ beside the
// packet header and model spec: blob file records (KVBF), the sequence
// (KVSQ), access statistics (KVAC), artifacts (KVAR) and the SeKV data in
// them (projections, head values), factors (KVSF), keep-sets (KVKS) and
// the positions bitmap. Each re-encodes whatever decodes and requires the
// same bytes back; every error must wrap a format sentinel.

// recordSeeds returns, per target, good inputs and deliberately broken
// ones (a flipped bit, a truncation, a byte appended).
func recordSeeds(tb testing.TB) map[string][][]byte {
	blob := format.EncodeBlobFileRecord(&format.BlobFileRecord{Size: 3 * format.Alignment, LiveBytes: format.Alignment,
		DeadBytes: format.Alignment / 2, Extents: 3, LiveExtents: 1, Sealed: true})
	seq := format.EncodeSequence(7)
	acc := format.EncodeAccess(1_700_000_000_000_000_000, 42)
	art := format.EncodeArtifact(format.Fingerprint{3}, "sekv/router-w", make([]byte, 24),
		&format.ArtifactMeta{DType: format.DTypeF32, Shape: []int{2, 3}, Note: "run 7"}, 5)
	opaque := format.EncodeArtifact(format.Fingerprint{4}, "adapter", []byte{1, 2, 3}, &format.ArtifactMeta{}, 6)
	factors, err := format.AppendFactors(nil, &format.Factors{Rows: 4, Cols: 3, Rank: 2,
		U: []float32{1, 0, 0, 1, 0.5, 0.5, -1, 2}, S: []float32{2, 1}, Vt: []float32{1, 0, 0, 0, 1, 0}}, format.DTypeBF16)
	if err != nil {
		tb.Fatal(err)
	}
	keep := format.AppendKeepSet(nil, &format.KeepSet{Layers: 2, KVHeads: 1, Tokens: 10, Keep: [][]int32{{0, 3, 9}, {1, 2, 8}}})
	pos := format.AppendPositions(nil, 10, [][]int32{{0, 3, 9}, {1, 2, 8}})
	return map[string][][]byte{
		"FuzzDecodeBlobFileRecord": {blob, flip(blob, 20), blob[:len(blob)-1], flip(blob, format.FrameSize)},
		"FuzzDecodeSequence":       {seq, flip(seq, 16), seq[:format.FrameSize+3]},
		"FuzzDecodeAccess":         {acc, flip(acc, 3), acc[:format.FrameSize+15]},
		"FuzzDecodeArtifact":       {art, opaque, flip(art, 53), art[:format.ArtifactFixedSize], append(bytes.Clone(opaque), 0)},
		"FuzzDecodeFactors":        {factors, flip(factors, 10), factors[:len(factors)-1]},
		"FuzzDecodeKeepSet":        {keep, flip(keep, 20), keep[:len(keep)-4]},
		// Positions inputs: layers, heads, tokens, kept, then the chunk.
		"FuzzDecodePositions": {append([]byte{2, 1, 10, 3}, pos...), append([]byte{2, 1, 10, 3}, flip(pos, 1)...),
			append([]byte{2, 1, 10, 3}, pos[:3]...)},
		// Head values and projections: layers, heads, head dim, then f32s.
		// {48, 0, 0}: zero heads, which the decoder once accepted and the
		// encoder refused (found by this target).
		"FuzzDecodeHeadValues":  {append([]byte{2, 2, 0}, make([]byte, 16)...), {1, 1, 0, 0, 0, 0xc0, 0x7f}, {48, 0, 0}},
		"FuzzDecodeProjections": {append([]byte{1, 2, 4}, make([]byte, 2*2*4*4)...), {1, 1, 2, 0, 0, 0x80, 0x3f}},
	}
}

func addSeeds(f *testing.F, name string) {
	for _, s := range recordSeeds(f)[name] {
		f.Add(s)
	}
}

// checkFormatErr requires err to wrap one of format's sentinels.
func checkFormatErr(t *testing.T, err error) {
	t.Helper()
	if !errors.Is(err, format.ErrCorruption) && !errors.Is(err, format.ErrVersion) && !errors.Is(err, format.ErrInvalidArgument) {
		t.Fatalf("error wraps no format sentinel: %v", err)
	}
}

func FuzzDecodeBlobFileRecord(f *testing.F) {
	addSeeds(f, "FuzzDecodeBlobFileRecord")
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := format.DecodeBlobFileRecord(b)
		if err != nil {
			checkErr(t, err)
			return
		}
		if r.LiveBytes+r.DeadBytes > r.Size || r.LiveExtents > r.Extents || r.Size%format.Alignment != 0 {
			t.Fatalf("accepted an inconsistent record %+v", r)
		}
		// A longer body than 40 bytes is accepted (room to grow): compare
		// the re-encoding with the record's first 40 body bytes.
		again := format.EncodeBlobFileRecord(&r)
		body, _ := format.Unseal(format.KindBlobFile, b)
		if !bytes.Equal(again[format.FrameSize:], body[:40]) {
			t.Fatalf("record does not re-encode to its bytes")
		}
	})
}

func FuzzDecodeSequence(f *testing.F) {
	addSeeds(f, "FuzzDecodeSequence")
	f.Fuzz(func(t *testing.T, b []byte) {
		n, err := format.DecodeSequence(b)
		if err != nil {
			checkErr(t, err)
			return
		}
		body, _ := format.Unseal(format.KindSequence, b)
		if again := format.EncodeSequence(n); !bytes.Equal(again[format.FrameSize:], body[:4]) {
			t.Fatalf("sequence %d does not re-encode to its bytes", n)
		}
	})
}

func FuzzDecodeAccess(f *testing.F) {
	addSeeds(f, "FuzzDecodeAccess")
	f.Fuzz(func(t *testing.T, b []byte) {
		last, uses, err := format.DecodeAccess(b)
		if err != nil {
			checkErr(t, err)
			return
		}
		body, _ := format.Unseal(format.KindAccess, b)
		if again := format.EncodeAccess(last, uses); !bytes.Equal(again[format.FrameSize:], body[:16]) {
			t.Fatalf("access statistics do not re-encode to their bytes")
		}
	})
}

// FuzzDecodeArtifact feeds artifact bodies (the frame is format.Seal's,
// fuzzed by the other framed targets).
func FuzzDecodeArtifact(f *testing.F) {
	addSeeds(f, "FuzzDecodeArtifact")
	f.Fuzz(func(t *testing.T, b []byte) {
		a, err := format.DecodeArtifact(b)
		if err != nil {
			checkErr(t, err)
			return
		}
		again := format.EncodeArtifact(a.Model, a.Name, b[len(b)-a.Size:], &a.Meta, a.CreatedUnixNs)
		if !bytes.Equal(again, b) {
			t.Fatalf("artifact %q does not re-encode to its bytes", a.Name)
		}
	})
}

func FuzzDecodeFactors(f *testing.F) {
	addSeeds(f, "FuzzDecodeFactors")
	f.Fuzz(func(t *testing.T, b []byte) {
		fs, dt, err := format.DecodeFactors(b)
		if err != nil {
			checkErr(t, err)
			return
		}
		// Decoding widens exactly, so encoding narrows back to the same bits.
		again, err := format.AppendFactors(nil, fs, dt)
		if err != nil || !bytes.Equal(again, b) {
			t.Fatalf("factors do not re-encode to their bytes (%v)", err)
		}
	})
}

func FuzzDecodeKeepSet(f *testing.F) {
	addSeeds(f, "FuzzDecodeKeepSet")
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := format.DecodeKeepSet(b)
		if err != nil {
			checkErr(t, err)
			return
		}
		if len(s.Keep) != s.Layers*s.KVHeads {
			t.Fatalf("%d lists for %d x %d", len(s.Keep), s.Layers, s.KVHeads)
		}
		if again := format.AppendKeepSet(nil, s); !bytes.Equal(again, b) {
			t.Fatalf("keep-set does not re-encode to its bytes")
		}
	})
}

// FuzzDecodePositions: b[0:4] give the shape (layers, heads, tokens, kept,
// each a byte), the rest is the chunk.
func FuzzDecodePositions(f *testing.F) {
	addSeeds(f, "FuzzDecodePositions")
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) < 4 {
			return
		}
		layers, heads, tokens, kept := int(b[0]), int(b[1]), int(b[2]), int(b[3])
		keep, err := format.DecodePositions(b[4:], layers, heads, tokens, kept)
		if err != nil {
			checkErr(t, err)
			return
		}
		for g, list := range keep {
			if len(list) != kept || !slices.IsSorted(list) || (kept > 0 && int(list[kept-1]) >= tokens) {
				t.Fatalf("list %d: %v for %d kept of %d tokens", g, list, kept, tokens)
			}
		}
		if again := format.AppendPositions(nil, tokens, keep); !bytes.Equal(again, b[4:]) {
			t.Fatalf("positions do not re-encode to their bytes")
		}
	})
}

// FuzzDecodeHeadValues: b[0], b[1] are layers and heads, b[2] the dtype
// (0: f32, else that dtype), the rest the data.
func FuzzDecodeHeadValues(f *testing.F) {
	addSeeds(f, "FuzzDecodeHeadValues")
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) < 3 {
			return
		}
		meta := format.ArtifactMeta{DType: format.DTypeF32, Shape: []int{int(b[0]), int(b[1])}}
		if b[2] != 0 {
			meta.DType = format.DType(b[2])
		}
		v, err := format.DecodeHeadValues(b[3:], meta, int(b[0]), int(b[1]))
		if err != nil {
			checkFormatErr(t, err)
			return
		}
		data, m, err := format.EncodeHeadValues(v, int(b[0]), int(b[1]))
		if err != nil || !bytes.Equal(data, b[3:]) || !slices.Equal(m.Shape, meta.Shape) {
			t.Fatalf("head values do not re-encode to their bytes (%v)", err)
		}
	})
}

// FuzzDecodeProjections: b[0], b[1], b[2] are layers, heads and head dim;
// d' follows from the data's length; the rest is the data.
func FuzzDecodeProjections(f *testing.F) {
	addSeeds(f, "FuzzDecodeProjections")
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) < 3 || b[0] == 0 || b[1] == 0 || b[2] == 0 {
			return
		}
		layers, heads, hd := int(b[0]), int(b[1]), int(b[2])
		dim := (len(b) - 3) / 4 / (layers * heads * hd)
		meta := format.ArtifactMeta{DType: format.DTypeF32, Shape: []int{layers, heads, dim, hd}}
		d, ws, err := format.DecodeProjections(b[3:], meta, layers, heads, hd)
		if err != nil {
			checkFormatErr(t, err)
			return
		}
		data, m, err := format.EncodeProjections(ws, layers, heads, d, hd)
		if err != nil || !bytes.Equal(data, b[3:]) || !slices.Equal(m.Shape, meta.Shape) {
			t.Fatalf("projections do not re-encode to their bytes (%v)", err)
		}
	})
}

// TestWriteRecordCorpus rewrites testdata/fuzz/*/seed-* of the targets
// above from recordSeeds; it only runs when asked.
func TestWriteRecordCorpus(t *testing.T) {
	if os.Getenv("KVSTORE_WRITE_CORPUS") == "" {
		t.Skip("set KVSTORE_WRITE_CORPUS=1 to rewrite the seed corpus")
	}
	targets := recordSeeds(t)
	meta, head := spanSeeds(t)
	mb, hb := meta[format.FrameSize:], head[format.FrameSize:]
	targets["FuzzDecodeSpanMeta"] = [][]byte{meta, head, flip(meta, 30), meta[:len(meta)-1]}
	targets["FuzzDecodeSpanMetaBody"] = [][]byte{mb, flip(mb, 120), flip(mb, 200)}
	targets["FuzzDecodeHeadMeta"] = [][]byte{hb, flip(hb, 64), flip(hb, 96), flip(hb, 200)}
	for target, inputs := range targets {
		dir := filepath.Join("testdata", "fuzz", target)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for i, in := range inputs {
			data := "go test fuzz v1\n[]byte(" + strconv.Quote(string(in)) + ")\n"
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("seed-%d", i)), []byte(data), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestRecordSeeds: the good seeds decode, and each broken one is refused
// with a format sentinel, so the corpus starts on both sides of every check.
func TestRecordSeeds(t *testing.T) {
	s := recordSeeds(t)
	decode := []struct {
		name string
		dec  func([]byte) error
	}{
		{"FuzzDecodeBlobFileRecord", func(b []byte) error { _, err := format.DecodeBlobFileRecord(b); return err }},
		{"FuzzDecodeSequence", func(b []byte) error { _, err := format.DecodeSequence(b); return err }},
		{"FuzzDecodeAccess", func(b []byte) error { _, _, err := format.DecodeAccess(b); return err }},
		{"FuzzDecodeArtifact", func(b []byte) error { _, err := format.DecodeArtifact(b); return err }},
		{"FuzzDecodeFactors", func(b []byte) error { _, _, err := format.DecodeFactors(b); return err }},
		{"FuzzDecodeKeepSet", func(b []byte) error { _, err := format.DecodeKeepSet(b); return err }},
		{"FuzzDecodePositions", func(b []byte) error {
			_, err := format.DecodePositions(b[4:], int(b[0]), int(b[1]), int(b[2]), int(b[3]))
			return err
		}},
	}
	good := map[string]int{"FuzzDecodeArtifact": 2}
	for _, tc := range decode {
		t.Run(tc.name, func(t *testing.T) {
			n := max(good[tc.name], 1)
			for i, in := range s[tc.name] {
				err := tc.dec(in)
				switch {
				case i < n && err != nil:
					t.Errorf("%s seed %d: %v, want it to decode", tc.name, i, err)
				case i >= n && !errors.Is(err, format.ErrCorruption):
					t.Errorf("%s seed %d: %v, want ErrCorruption", tc.name, i, err)
				}
			}
		})
	}
}

// blobLogSeeds are the records the blob log holds so that the catalog can
// be rebuilt from it: a put record (KVPR), a tombstone (KVTS) and the
// catalog's next-record sequence (KVRS), good and broken.
func blobLogSeeds(tb testing.TB) map[string][][]byte {
	m := &format.ModelSpec{Architecture: "llama", Layers: 2, KVHeads: 1, HeadDim: 8, DType: format.DTypeF32,
		RoPE: format.RoPE{Style: format.RoPEInterleaved, Theta: 10000}, WeightsID: "fuzz"}
	h := packetHeader(2, 1, 8, 5, 1, format.DTypeF32, format.CodecRaw)
	h.Model = m.Fingerprint()
	h.ID = format.ComputePacketID(h.Namespace, h.Model, h.AdapterID, h.TokenIDs)
	put, err := format.EncodePutRecord(3, h, m)
	if err != nil {
		tb.Fatal(err)
	}
	ts, err := format.EncodeTombstone(&format.Tombstone{Seq: 4, Namespace: "tenant", ID: h.ID, Model: h.Model})
	if err != nil {
		tb.Fatal(err)
	}
	seq := format.EncodeRecordSeq(5)
	return map[string][][]byte{
		"FuzzDecodePutRecord": {put, flip(put, 30), put[:len(put)-1], append(bytes.Clone(put), 0)},
		"FuzzDecodeTombstone": {ts, flip(ts, 20), ts[:len(ts)-1]},
		"FuzzDecodeRecordSeq": {seq, flip(seq, 16), seq[:format.FrameSize+7]},
	}
}

func addBlobLogSeeds(f *testing.F, name string) {
	for _, s := range blobLogSeeds(f)[name] {
		f.Add(s)
	}
}

// FuzzDecodePutRecord: whatever decodes re-encodes to the same bytes.
func FuzzDecodePutRecord(f *testing.F) {
	addBlobLogSeeds(f, "FuzzDecodePutRecord")
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := format.DecodePutRecord(b)
		if err != nil {
			checkFormatErr(t, err)
			return
		}
		again, err := format.EncodePutRecord(r.Seq, r.Header, r.Spec)
		if err != nil {
			t.Fatalf("decoded put record does not re-encode: %v", err)
		}
		if r2, err := format.DecodePutRecord(again); err != nil || r2.Seq != r.Seq || r2.Header.ID != r.Header.ID {
			t.Fatalf("re-encoded put record: %v", err)
		}
	})
}

// FuzzDecodeTombstone: whatever decodes re-encodes to the same bytes.
func FuzzDecodeTombstone(f *testing.F) {
	addBlobLogSeeds(f, "FuzzDecodeTombstone")
	f.Fuzz(func(t *testing.T, b []byte) {
		ts, err := format.DecodeTombstone(b)
		if err != nil {
			checkFormatErr(t, err)
			return
		}
		again, err := format.EncodeTombstone(ts)
		if err != nil || !bytes.Equal(again, b) {
			t.Fatalf("tombstone re-encodes to other bytes: %v", err)
		}
	})
}

// FuzzDecodeRecordSeq: whatever decodes re-encodes to the same bytes.
func FuzzDecodeRecordSeq(f *testing.F) {
	addBlobLogSeeds(f, "FuzzDecodeRecordSeq")
	f.Fuzz(func(t *testing.T, b []byte) {
		n, err := format.DecodeRecordSeq(b)
		if err != nil {
			checkFormatErr(t, err)
			return
		}
		if again := format.EncodeRecordSeq(n); !bytes.Equal(again, b) {
			t.Fatal("record sequence re-encodes to other bytes")
		}
	})
}
