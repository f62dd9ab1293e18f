package format

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
)

// testSpanMeta is a valid root: 40 tokens in two factored spans and one
// resident one, two layers of one 8-dim KV head, d' = 4.
func testSpanMeta() *SpanMeta {
	m := &SpanMeta{
		Model: Fingerprint{1, 2}, Context: ContextID{3, 4}, Tokens: 40, Layers: 2, KVHeads: 1, HeadDim: 8,
		ProjDim: 4, ResidentDType: DTypeBF16, FactorDType: DTypeF16, BasePosition: 5,
		BlobFile: 1, ExtentOffset: BlobHeaderSize, ExtentLength: 16 << 10, CreatedUnixNs: 1,
		Spans:      []Span{{Start: 0, End: 16, Factored: true}, {Start: 16, End: 28, Factored: true}, {Start: 28, End: 40}},
		Anchors:    []int{0, 1, 2, 3, 16},
		Projection: "sekv/router-w-pca", Mean: 2, Std: 1, Threshold: 3, AnchorThreshold: 4,
	}
	m.Resident = append([]int(nil), m.Anchors...)
	for t := 28; t < 40; t++ {
		m.Resident = append(m.Resident, t)
	}
	n := uint64(len(m.Resident) * 8 * 2)
	for l := range uint64(2) {
		m.Blocks = append(m.Blocks, ResidentBlock{KOffset: 2 * l * 512, VOffset: (2*l + 1) * 512, Length: n, KCRC: 7, VCRC: 8})
	}
	return m
}

// testHeadMeta is a valid head record of testSpanMeta.
func testHeadMeta(m *SpanMeta) *HeadMeta {
	h := &HeadMeta{Layer: 1, Head: 0, K: make([]FactorBlock, 3), V: make([]FactorBlock, 3)}
	off := uint64(4096)
	for s, sp := range m.Spans[:2] {
		for i, dst := range []*FactorBlock{&h.K[s], &h.V[s]} {
			rank := 3 - i
			n := FactorLayout{Rows: sp.Len(), Cols: 8, Rank: rank, DType: m.FactorDType}.Size()
			*dst = FactorBlock{Offset: off, Length: uint32(n), CRC: uint32(s), Rank: rank}
			off += 1024
		}
	}
	for s := range m.Spans {
		f := float32(s)
		h.Summaries = append(h.Summaries, SpanSummary{
			Key: []float32{f, 1, 2, 3, 4, 5, 6, 7}, Value: []float32{-f, 0, 0, 0, 0, 0, 0, 1}, Proj: []float32{f, f, 0, 1}})
	}
	return h
}

func TestSpanMetaRoundTrip(t *testing.T) {
	m := testSpanMeta()
	v, err := m.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if len(v) != FrameSize+spanMetaFixed+3*spanEntrySize+4*(17+5)+2*spanLayerSize+len(m.Projection) {
		t.Fatalf("root of %d bytes", len(v))
	}
	if n := SpanMetaLen(3, 17, 5, 2, len(m.Projection)); len(v) != n {
		t.Fatalf("root of %d bytes, SpanMetaLen %d", len(v), n)
	}
	got, err := DecodeSpanMeta(v)
	if err != nil {
		t.Fatal(err)
	}
	if again, err := got.Encode(); err != nil || !bytes.Equal(again, v) {
		t.Fatalf("root does not re-encode to its bytes (%v)", err)
	}
	hv, err := testHeadMeta(m).Encode(m)
	if err != nil {
		t.Fatal(err)
	}
	if n := HeadMetaLen(3, 8, 4); len(hv) != n || n != FrameSize+headFixed+3*HeadMetaSpanLen(8, 4) {
		t.Fatalf("head of %d bytes, HeadMetaLen %d", len(hv), n)
	}
	h, err := DecodeHeadMeta(hv, got)
	if err != nil || h.Layer != 1 || len(h.Summaries) != 3 || h.K[0].Rank != 3 || h.V[1].Rank != 2 || h.K[2] != (FactorBlock{}) {
		t.Fatalf("head %+v, %v", h, err)
	}
	if again, err := h.Encode(got); err != nil || !bytes.Equal(again, hv) {
		t.Fatalf("head does not re-encode to its bytes (%v)", err)
	}
	if _, err := DecodeHeadMeta(v, got); !errors.Is(err, ErrCorruption) {
		t.Errorf("root read as a head: %v", err)
	}
	if _, err := DecodeSpanMeta(hv); !errors.Is(err, ErrCorruption) {
		t.Errorf("head read as a root: %v", err)
	}
}

func TestSpanMetaRefusals(t *testing.T) {
	m := testSpanMeta()
	v, _ := m.Encode()
	reseal := func(t *testing.T, edit func(b []byte)) []byte {
		b := bytes.Clone(v[FrameSize:])
		edit(b)
		out, err := Seal(KindSpan, b)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	le := binary.LittleEndian
	for _, tc := range []struct {
		name string
		edit func(b []byte)
	}{
		{"type", func(b []byte) { b[0] = 2 }},
		{"reserved", func(b []byte) { b[92] = 1 }},
		{"spans count", func(b []byte) { le.PutUint32(b[120:], 4) }},
		{"span gap", func(b []byte) { le.PutUint32(b[spanMetaFixed+12:], 17) }},
		{"anchor", func(b []byte) { b[spanMetaFixed+3*spanEntrySize+17*4] = 5 }},
		{"extent", func(b []byte) { le.PutUint64(b[96:], 100) }},
		{"block", func(b []byte) { le.PutUint64(b[len(b)-len(m.Projection)-spanLayerSize:], 1) }},
		{"no W name", func(b []byte) { le.PutUint16(b[78:], 0) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := DecodeSpanMeta(reseal(t, tc.edit)); !errors.Is(err, ErrCorruption) {
				t.Errorf("%s: %v, want ErrCorruption", tc.name, err)
			}
		})
	}
	other := testSpanMeta()
	other.ExtentOffset += Alignment
	hv, _ := testHeadMeta(m).Encode(m)
	if _, err := DecodeHeadMeta(hv, other); !errors.Is(err, ErrOtherWrite) || !errors.Is(err, ErrCorruption) {
		t.Errorf("head of another write: %v, want ErrOtherWrite in ErrCorruption", err)
	}
	bad := testHeadMeta(m)
	bad.Summaries[0].Key = bad.Summaries[0].Key[:7]
	if _, err := bad.Encode(m); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("short summary: %v, want ErrInvalidArgument", err)
	}
}

func TestContextIDSeparatesFields(t *testing.T) {
	var m1, m2 Fingerprint
	m2[0] = 1
	ids := map[ContextID]string{}
	for _, c := range []struct{ ns, name string }{{"a", "bc"}, {"ab", "c"}, {"", "abc"}, {"abc", "x"}} {
		for i, m := range []Fingerprint{m1, m2} {
			id := ComputeContextID(c.ns, m, c.name)
			what := c.ns + "|" + c.name + "|" + string(rune('0'+i))
			if prev, dup := ids[id]; dup {
				t.Fatalf("%s and %s share id %x", prev, what, id[:8])
			}
			ids[id] = what
			if ComputeContextID(c.ns, m, c.name) != id {
				t.Fatalf("%s: id is not deterministic", what)
			}
		}
	}
}

// TestContextIDPinned pins ComputeContextID's output on fixed inputs: a span
// memory's id is written in its records and its extent trailer, so any
// change to the derivation orphans every stored memory.
func TestContextIDPinned(t *testing.T) {
	for _, c := range []struct {
		ns    string
		model Fingerprint
		name  string
		want  string
	}{
		{"", Fingerprint{}, "c", "f4ea50adba66bbb65bb30e603b938dc040eb0c51d27652110618e08db15d57dd"},
		{"ns", Fingerprint{1, 2, 3}, "ctx", "415403e0d381ee93eb4b6303d3ecb98ed421bde5e48eda29f88f095f88511559"},
		{"a", Fingerprint{1, 2, 3}, "bc", "240acc0d1acdc375dd05b4a45426bf15a6b3775e6f7ea3ff451ffabb9ec1fe3f"},
		{"ab", Fingerprint{1, 2, 3}, "c", "9758d593dae76667bbf2d17ed2dc4013733b376c7207d2d61ff4b202f1a53013"},
		{"tenant/ü", Fingerprint{0xff, 31: 0xee}, "chat 42", "4e77bd82533f9c502a6e4273a9c3902102aac1440e244aee736492673ae470d7"},
	} {
		if got := ComputeContextID(c.ns, c.model, c.name).String(); got != c.want {
			t.Errorf("ComputeContextID(%q, %x, %q) = %s, want %s", c.ns, c.model[:4], c.name, got, c.want)
		}
	}
}
