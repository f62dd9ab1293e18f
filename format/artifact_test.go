package format

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
)

func TestArtifactRoundTrip(t *testing.T) {
	meta := ArtifactMeta{DType: DTypeBF16, Shape: []int{2, 1}, Note: "run 7"}
	b := EncodeArtifact(Fingerprint{3}, "sekv/tau", []byte{1, 2, 3, 4}, &meta, 99)
	if len(b) != ArtifactFixedSize+16+len("sekv/tau")+len("run 7")+4 {
		t.Fatalf("body of %d bytes", len(b))
	}
	a, err := DecodeArtifact(b)
	if err != nil || a.Model != (Fingerprint{3}) || a.Name != "sekv/tau" || a.Size != 4 || a.CreatedUnixNs != 99 ||
		a.Meta.DType != DTypeBF16 || len(a.Meta.Shape) != 2 || a.Meta.Note != "run 7" {
		t.Fatalf("decoded %+v, %v", a, err)
	}
	if !bytes.Equal(b[len(b)-a.Size:], []byte{1, 2, 3, 4}) {
		t.Fatalf("data is not the body's last %d bytes", a.Size)
	}
}

func TestArtifactRefusals(t *testing.T) {
	good := EncodeArtifact(Fingerprint{3}, "name", []byte{1, 2, 3, 4}, &ArtifactMeta{DType: DTypeBF16, Shape: []int{2}}, 5)
	for _, tc := range []struct {
		name string
		edit func([]byte) []byte
	}{
		{"short", func(b []byte) []byte { return b[:ArtifactFixedSize-1] }},
		{"reserved", func(b []byte) []byte { b[54] = 1; return b }},
		{"rank", func(b []byte) []byte { b[53] = MaxArtifactRank + 1; return b }},
		{"length", func(b []byte) []byte { return append(b, 0) }},
		{"shape vs data", func(b []byte) []byte { binary.LittleEndian.PutUint64(b[ArtifactFixedSize:], 3); return b }},
		{"huge dimension", func(b []byte) []byte { binary.LittleEndian.PutUint64(b[ArtifactFixedSize:], 1<<40); return b }},
		{"unknown dtype", func(b []byte) []byte { b[52] = 0xee; return b }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := DecodeArtifact(tc.edit(bytes.Clone(good))); !errors.Is(err, ErrCorruption) {
				t.Errorf("%s: %v, want ErrCorruption", tc.name, err)
			}
		})
	}
}

func TestArtifactMetaCheck(t *testing.T) {
	for _, c := range []struct {
		name string
		m    ArtifactMeta
		n    int
		ok   bool
	}{
		{"opaque", ArtifactMeta{}, 7, true},
		{"f32 2x3", ArtifactMeta{DType: DTypeF32, Shape: []int{2, 3}}, 24, true},
		{"shape, no dtype", ArtifactMeta{Shape: []int{1}}, 1, false},
		{"bytes off", ArtifactMeta{DType: DTypeF32, Shape: []int{2, 3}}, 20, false},
		{"negative", ArtifactMeta{DType: DTypeF32, Shape: []int{-1}}, 4, false},
		{"rank", ArtifactMeta{DType: DTypeU8, Shape: make([]int, MaxArtifactRank+1)}, 0, false},
		{"note", ArtifactMeta{Note: string(make([]byte, MaxNameLen+1))}, 0, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if err := c.m.Check(c.n); (err == nil) != c.ok {
				t.Errorf("%s: %v, want ok %v", c.name, err, c.ok)
			}
		})
	}
}
