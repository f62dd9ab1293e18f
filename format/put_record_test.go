package format

import (
	"errors"
	"reflect"
	"testing"
)

// putRecordHeader is a valid header of smallShape for spec m.
func putRecordHeader(m *ModelSpec) *PacketHeader {
	h := testHeader(smallShape)
	h.Model = m.Fingerprint()
	h.ID = ComputePacketID(h.Namespace, h.Model, h.AdapterID, h.TokenIDs)
	return h
}

func TestPutRecordRoundTrip(t *testing.T) {
	m := testSpecs()["stories260K"]
	h := putRecordHeader(m)
	v, err := EncodePutRecord(42, h, m)
	if err != nil {
		t.Fatal(err)
	}
	r, err := DecodePutRecord(v)
	if err != nil {
		t.Fatal(err)
	}
	if r.Seq != 42 || !reflect.DeepEqual(r.Header, h) || r.Spec.Fingerprint() != m.Fingerprint() {
		t.Fatalf("round trip: seq %d\n got %+v\nwant %+v", r.Seq, r.Header, h)
	}
	// The length does not depend on the CRC values (zero ones included)
	// or on non-zero offsets and lengths: Put sizes the record before the
	// chunks are written.
	g := putRecordHeader(m)
	for i := range g.Chunks {
		g.Chunks[i].CRC32C = uint32(i) * 0x01000193 // chunk 0's CRC is 0
		g.Chunks[i].Offset += 7 * Alignment
	}
	g.ExtentOffset += 7 * Alignment
	g.ExtentLength += 0 // same payload
	w, err := EncodePutRecord(1<<60, g, m)
	if err != nil {
		t.Fatal(err)
	}
	if len(w) != len(v) {
		t.Fatalf("record of other CRCs and offsets: %d bytes, want %d", len(w), len(v))
	}
}

func TestPutRecordRefusals(t *testing.T) {
	m := testSpecs()["stories260K"]
	h := putRecordHeader(m)
	if _, err := EncodePutRecord(1, h, testSpecs()["qwen2.5-3b"]); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("another model's spec: %v", err)
	}
	v, err := EncodePutRecord(1, h, m)
	if err != nil {
		t.Fatal(err)
	}
	for i := range v {
		b := append([]byte(nil), v...)
		b[i] ^= 0x10
		if _, err := DecodePutRecord(b); !errors.Is(err, ErrCorruption) && !errors.Is(err, ErrVersion) {
			t.Fatalf("flipped byte %d: %v", i, err)
		}
	}
	for _, n := range []int{0, FrameSize, len(v) / 2, len(v) - 1} {
		if _, err := DecodePutRecord(v[:n]); !errors.Is(err, ErrCorruption) {
			t.Fatalf("truncated to %d: %v", n, err)
		}
	}
}

func TestRecordSeqRoundTrip(t *testing.T) {
	for _, n := range []uint64{0, 1, 1 << 63} {
		got, err := DecodeRecordSeq(EncodeRecordSeq(n))
		if err != nil || got != n {
			t.Fatalf("%d: %d %v", n, got, err)
		}
	}
	v := EncodeRecordSeq(9)
	v[FrameSize] ^= 1
	if _, err := DecodeRecordSeq(v); !errors.Is(err, ErrCorruption) {
		t.Fatalf("flipped: %v", err)
	}
}
