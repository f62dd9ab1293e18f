package fuzz

import (
	"bytes"
	"testing"

	"github.com/kvstore/kvstore/format"
)

// spanMeta is a valid span memory root: 40 tokens in two factored spans and
// one resident one, two layers of one 8-dim KV head, d' = 4.
func spanMeta() *format.SpanMeta {
	m := &format.SpanMeta{
		Model: format.Fingerprint{1, 2}, Context: format.ContextID{3, 4}, Tokens: 40, Layers: 2, KVHeads: 1, HeadDim: 8,
		ProjDim: 4, ResidentDType: format.DTypeBF16, FactorDType: format.DTypeF16, BasePosition: 5,
		BlobFile: 1, ExtentOffset: format.BlobHeaderSize, ExtentLength: 16 << 10, CreatedUnixNs: 1,
		Spans:      []format.Span{{Start: 0, End: 16, Factored: true}, {Start: 16, End: 28, Factored: true}, {Start: 28, End: 40}},
		Anchors:    []int{0, 1, 2, 3, 16},
		Projection: "sekv/router-w-pca", Mean: 2, Std: 1, Threshold: 3, AnchorThreshold: 4,
	}
	m.Resident = append([]int(nil), m.Anchors...)
	for t := 28; t < 40; t++ {
		m.Resident = append(m.Resident, t)
	}
	n := uint64(len(m.Resident) * 8 * 2)
	for l := range uint64(2) {
		m.Blocks = append(m.Blocks, format.ResidentBlock{KOffset: 2 * l * 512, VOffset: (2*l + 1) * 512, Length: n, KCRC: 7, VCRC: 8})
	}
	return m
}

// headMeta is a valid head record of spanMeta.
func headMeta(m *format.SpanMeta) *format.HeadMeta {
	h := &format.HeadMeta{Layer: 1, Head: 0, K: make([]format.FactorBlock, 3), V: make([]format.FactorBlock, 3)}
	off := uint64(4096)
	for s, sp := range m.Spans[:2] {
		for i, dst := range []*format.FactorBlock{&h.K[s], &h.V[s]} {
			rank := 3 - i
			n := format.FactorLayout{Rows: sp.Len(), Cols: 8, Rank: rank, DType: m.FactorDType}.Size()
			*dst = format.FactorBlock{Offset: off, Length: uint32(n), CRC: uint32(s), Rank: rank}
			off += 1024
		}
	}
	for s := range m.Spans {
		f := float32(s)
		h.Summaries = append(h.Summaries, format.SpanSummary{
			Key: []float32{f, 1, 2, 3, 4, 5, 6, 7}, Value: []float32{-f, 0, 0, 0, 0, 0, 0, 1}, Proj: []float32{f, f, 0, 1}})
	}
	return h
}

func spanSeeds(tb testing.TB) (meta, head []byte) {
	m := spanMeta()
	meta, err := m.Encode()
	if err != nil {
		tb.Fatal(err)
	}
	if head, err = headMeta(m).Encode(m); err != nil {
		tb.Fatal(err)
	}
	return meta, head
}

// FuzzDecodeSpanMeta feeds whole catalog values, frame and CRC included.
func FuzzDecodeSpanMeta(f *testing.F) {
	meta, head := spanSeeds(f)
	f.Add(meta)
	f.Add(head)
	f.Add(flip(meta, 30))
	f.Add(meta[:len(meta)-1])
	f.Fuzz(func(t *testing.T, b []byte) { checkSpanMeta(t, b) })
}

// FuzzDecodeSpanMetaBody feeds bodies sealed with a correct CRC, so that
// the fuzzer reaches the verifier instead of the checksum.
func FuzzDecodeSpanMetaBody(f *testing.F) {
	meta, _ := spanSeeds(f)
	body := meta[format.FrameSize:]
	f.Add(body)
	f.Add(flip(body, 120)) // span count
	f.Add(flip(body, 200)) // first span's start
	f.Fuzz(func(t *testing.T, body []byte) {
		b, err := format.Seal(spanKind(t), body)
		if err != nil {
			return
		}
		checkSpanMeta(t, b)
	})
}

// FuzzDecodeHeadMeta feeds head bodies, sealed, against the seed root.
func FuzzDecodeHeadMeta(f *testing.F) {
	meta, head := spanSeeds(f)
	body := head[format.FrameSize:]
	f.Add(body)
	f.Add(flip(body, 64))  // first K offset
	f.Add(flip(body, 96))  // first K rank
	f.Add(flip(body, 200)) // a summary float
	m, err := format.DecodeSpanMeta(meta)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		b, err := format.Seal(spanKind(t), body)
		if err != nil {
			return
		}
		h, err := format.DecodeHeadMeta(b, m)
		if err != nil {
			checkErr(t, err)
			return
		}
		again, err := h.Encode(m)
		if err != nil || !bytes.Equal(again, b) {
			t.Fatalf("decoded head does not re-encode to its bytes (%v)", err)
		}
	})
}

func checkSpanMeta(t *testing.T, b []byte) {
	m, err := format.DecodeSpanMeta(b)
	if err != nil {
		checkErr(t, err)
		return
	}
	again, err := m.Encode()
	if err != nil || !bytes.Equal(again, b) {
		t.Fatalf("decoded span meta does not re-encode to its bytes (%v)", err)
	}
}

// spanKind is the registered "KVSP" record kind.
func spanKind(t *testing.T) format.RecordKind {
	k, ok := format.KindOf([]byte("KVSP"))
	if !ok {
		t.Fatal("record kind KVSP is not registered")
	}
	return k
}
