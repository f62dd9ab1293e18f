package store

import (
	"context"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/reconstruct"
	"github.com/kvstore/kvstore/store/internal/catalog"
)

// resealFrame recomputes a framed value's CRC after its bytes were edited
// (frame: magic u32, version u16, reserved u16, length u32, crc u32).
func resealFrame(b []byte) []byte {
	binary.LittleEndian.PutUint32(b[12:], format.CRCUpdate(format.CRC(b[:12]), b[format.FrameSize:]))
	return b
}

// TestReliabilityHostileHeaders writes hostile packet headers into the
// catalog of a real store, under the key of a real packet, and reads them
// through Get: each fails with the expected sentinel, nothing panics, no
// tensor is returned, and Check reports the ones that decode but point
// wrong. Format-level cases the format package tests field by field
// (format/header_codec_test.go) are repeated here end to end.
func TestReliabilityHostileHeaders(t *testing.T) {
	mem := vfs.NewMem()
	g := buildGolden(t, mem, "/db")
	db := g.open(t, nil)
	defer db.Close()
	a, b := 1, 2 // two packets of the same model, in the same blob file or not
	orig, err := format.EncodeHeader(g.headers[a])
	if err != nil {
		t.Fatal(err)
	}
	edit := func(f func(h *format.PacketHeader)) []byte {
		h := *g.headers[a]
		h.Chunks = append([]format.ChunkDesc(nil), h.Chunks...)
		f(&h)
		v, err := format.EncodeHeader(&h)
		if err != nil {
			t.Fatalf("hostile header does not encode: %v", err)
		}
		return v
	}
	raw := func(f func(v []byte) []byte) []byte { return f(append([]byte(nil), orig...)) }
	fileSize := uint64(len(mustData(t, mem, g.blobPath(g.headers[a].BlobFile))))
	for _, tc := range []struct {
		name    string
		v       []byte
		want    error
		finding FindingKind // Check's finding, for headers that decode
	}{
		{"bad magic", raw(func(v []byte) []byte { v[0] ^= 0x20; return resealFrame(v) }), ErrCorruption, ""},
		{"spec magic", raw(func(v []byte) []byte { copy(v, "KVMS"); return resealFrame(v) }), ErrCorruption, ""},
		{"unknown version", raw(func(v []byte) []byte { v[4] = 9; return resealFrame(v) }), ErrVersion, ""},
		{"version 0", raw(func(v []byte) []byte { v[4] = 0; return resealFrame(v) }), ErrCorruption, ""},
		{"oversized header", raw(func(v []byte) []byte { binary.LittleEndian.PutUint32(v[8:], 1<<31); return resealFrame(v) }), ErrCorruption, ""},
		{"length past the value", raw(func(v []byte) []byte { binary.LittleEndian.PutUint32(v[8:], uint32(len(v))); return resealFrame(v) }), ErrCorruption, ""},
		{"truncated", raw(func(v []byte) []byte { return v[:len(v)-9] }), ErrCorruption, ""},
		{"empty", nil, ErrCorruption, ""},
		{"extent past the file", edit(func(h *format.PacketHeader) {
			shift := (fileSize + format.Alignment) - h.ExtentOffset
			h.ExtentOffset += shift
			for i := range h.Chunks {
				h.Chunks[i].Offset += shift
			}
		}), ErrCorruption, FindingDangling},
		{"extent overlapping another packet's", edit(func(h *format.PacketHeader) {
			o := g.headers[0]
			shift := int64(o.ExtentOffset) - int64(h.ExtentOffset)
			h.BlobFile, h.ExtentOffset = o.BlobFile, o.ExtentOffset
			for i := range h.Chunks {
				h.Chunks[i].BlobFile, h.Chunks[i].Offset = o.BlobFile, uint64(int64(h.Chunks[i].Offset)+shift)
			}
		}), ErrCorruption, FindingOverlap},
		{"uncatalogued blob file", edit(func(h *format.PacketHeader) {
			h.BlobFile = 99
			for i := range h.Chunks {
				h.Chunks[i].BlobFile = 99
			}
		}), ErrCorruption, FindingDangling},
		{"another packet's header", func() []byte {
			v, err := format.EncodeHeader(g.headers[b])
			if err != nil {
				t.Fatal(err)
			}
			return v
		}(), ErrCorruption, FindingRecord},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := catalog.HeaderKey(g.packets[a].Namespace, g.ids[a])
			if err := db.cat.DB.Set(key, tc.v, pebble.Sync); err != nil {
				t.Fatal(err)
			}
			defer func() {
				if err := db.cat.DB.Set(key, orig, pebble.Sync); err != nil {
					t.Fatal(err)
				}
			}()
			out, err := readBack(db, g.packets[a], g.ids[a])
			if out == readPanic || out == readWrong || !errors.Is(err, tc.want) {
				t.Fatalf("read = %v (%v), want %v", out, err, tc.want)
			}
			rep, err := db.Check(context.Background(), CheckOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if rep.OK() {
				t.Fatal("Check found nothing")
			}
			if tc.finding != "" && !hasKind(rep.Findings, tc.finding) {
				t.Fatalf("Check found %v, want a %s finding", rep.Findings, tc.finding)
			}
		})
	}
	g.checkAll(t, db, "after the hostile headers")
}

// hasKind reports whether a finding of kind k is among fs.
func hasKind(fs []Finding, k FindingKind) bool {
	for _, f := range fs {
		if f.Kind == k {
			return true
		}
	}
	return false
}

// TestReliabilityHostileFactors: factor descriptors with rank above their
// dims, dims of zero, or a size product that overflows are ErrCorruption.
func TestReliabilityHostileFactors(t *testing.T) {
	good, err := reconstruct.AppendFactors(nil, &reconstruct.Factors{Rows: 4, Cols: 3, Rank: 2,
		U: make([]float32, 8), S: []float32{2, 1}, Vt: make([]float32, 6)}, format.DTypeF32)
	if err != nil {
		t.Fatal(err)
	}
	set := func(f func(b []byte)) []byte {
		b := append([]byte(nil), good...)
		f(b)
		return b
	}
	for _, tc := range []struct {
		name string
		b    []byte
	}{
		{"rank > cols", set(func(b []byte) { binary.LittleEndian.PutUint16(b[10:], 4) })},
		{"rank > rows", set(func(b []byte) { binary.LittleEndian.PutUint32(b[4:], 1) })},
		{"rows 0", set(func(b []byte) { binary.LittleEndian.PutUint32(b[4:], 0) })},
		{"cols 0", set(func(b []byte) { binary.LittleEndian.PutUint16(b[8:], 0) })},
		{"product overflows", set(func(b []byte) {
			binary.LittleEndian.PutUint32(b[4:], 1<<32-1)
			binary.LittleEndian.PutUint16(b[10:], 3)
		})},
		{"cols past head dim", set(func(b []byte) { binary.LittleEndian.PutUint16(b[8:], 1<<15) })},
		{"bad magic", set(func(b []byte) { b[0] ^= 1 })},
		{"unknown dtype", set(func(b []byte) { b[12] = 77 })},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, _, err := reconstruct.DecodeFactors(tc.b); !errors.Is(err, ErrCorruption) {
				t.Errorf("%s: DecodeFactors = %v, want ErrCorruption", tc.name, err)
			}
		})
	}
}
