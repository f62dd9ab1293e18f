package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store/internal/catalog"
)

// spanRecords returns the stored root and one head record of a memory.
func spanRecords(t *testing.T) (meta, head []byte) {
	t.Helper()
	db, _, _ := openSpanDB(t, false)
	defer db.Close()
	_, in := spanFixture(t, 40, 3, format.DTypeBF16)
	m := buildSpans(t, db, in, SpanOptions{ProjectionDim: 4})
	if _, err := db.PutSpanMemory(context.Background(), "ns", "ctx", m); err != nil {
		t.Fatal(err)
	}
	for _, k := range [][]byte{catalog.SpanMetaKey("ns", "ctx"), catalog.SpanHeadKey("ns", "ctx", 1, 1)} {
		if _, err := db.cat.Get(k, func(v []byte) error {
			if meta == nil {
				meta = append([]byte(nil), v...)
			} else {
				head = append([]byte(nil), v...)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	return meta, head
}

func TestSpanRecordsRoundTrip(t *testing.T) {
	mv, hv := spanRecords(t)
	m, err := format.DecodeSpanMeta(mv)
	if err != nil {
		t.Fatal(err)
	}
	again, err := m.Encode()
	if err != nil || !bytes.Equal(again, mv) {
		t.Fatalf("span meta does not re-encode to its bytes (%v)", err)
	}
	h, err := format.DecodeHeadMeta(hv, m)
	if err != nil {
		t.Fatal(err)
	}
	if h.Layer != 1 || h.Head != 1 || len(h.Summaries) != len(m.Spans) || len(h.Summaries[0].Proj) != 4 {
		t.Fatalf("head meta %d/%d with %d summaries", h.Layer, h.Head, len(h.Summaries))
	}
	again, err = h.Encode(m)
	if err != nil || !bytes.Equal(again, hv) {
		t.Fatalf("head meta does not re-encode to its bytes (%v)", err)
	}
	if _, err := format.DecodeHeadMeta(mv, m); !errors.Is(err, ErrCorruption) {
		t.Fatalf("root decoded as a head: %v", err)
	}
	if _, err := format.DecodeSpanMeta(hv); !errors.Is(err, ErrCorruption) {
		t.Fatalf("head decoded as a root: %v", err)
	}
}

// reseal frames a mutated body with a correct CRC, so that the decoders'
// checks, not the CRC, meet it.
func reseal(t *testing.T, v []byte, mutate func([]byte) []byte) []byte {
	t.Helper()
	b, err := format.Seal(format.KindSpan, mutate(append([]byte(nil), v[format.FrameSize:]...)))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestSpanRecordsMutations(t *testing.T) {
	mv, hv := spanRecords(t)
	m, err := format.DecodeSpanMeta(mv)
	if err != nil {
		t.Fatal(err)
	}
	// Every byte of both bodies, flipped: never a panic, and whatever still
	// decodes re-encodes to the same bytes.
	for i := format.FrameSize; i < len(mv); i++ {
		for _, bit := range []byte{0x01, 0x80} {
			v := reseal(t, mv, func(b []byte) []byte { b[i-format.FrameSize] ^= bit; return b })
			got, err := format.DecodeSpanMeta(v)
			if err != nil {
				if !errors.Is(err, ErrCorruption) {
					t.Fatalf("meta byte %d: error wraps no sentinel: %v", i, err)
				}
				continue
			}
			if again, err := got.Encode(); err != nil || !bytes.Equal(again, v) {
				t.Fatalf("meta byte %d: decoded but does not re-encode (%v)", i, err)
			}
		}
	}
	for i := format.FrameSize; i < len(hv); i++ {
		v := reseal(t, hv, func(b []byte) []byte { b[i-format.FrameSize] ^= 0x40; return b })
		got, err := format.DecodeHeadMeta(v, m)
		if err != nil {
			if !errors.Is(err, ErrCorruption) {
				t.Fatalf("head byte %d: error wraps no sentinel: %v", i, err)
			}
			continue
		}
		if again, err := got.Encode(m); err != nil || !bytes.Equal(again, v) {
			t.Fatalf("head byte %d: decoded but does not re-encode (%v)", i, err)
		}
	}
	for n := 0; n < len(mv); n += 7 {
		if _, err := format.DecodeSpanMeta(mv[:n]); err == nil {
			t.Fatalf("meta truncated to %d bytes decoded", n)
		}
	}
	for n := 0; n < len(hv); n += 7 {
		if _, err := format.DecodeHeadMeta(hv[:n], m); err == nil {
			t.Fatalf("head truncated to %d bytes decoded", n)
		}
	}
}

func TestSpanRecordsHostileCounts(t *testing.T) {
	mv, _ := spanRecords(t)
	// Counts asking for far more than the body holds are refused before
	// anything is allocated.
	for _, off := range []int{68, 120, 124, 128} {
		v := reseal(t, mv, func(b []byte) []byte { binary.LittleEndian.PutUint32(b[off:], 0xffffffff); return b })
		if _, err := format.DecodeSpanMeta(v); !errors.Is(err, ErrCorruption) {
			t.Fatalf("count at %d set to 2^32-1: %v", off, err)
		}
	}
	v := reseal(t, mv, func(b []byte) []byte { binary.LittleEndian.PutUint16(b[72:], 0xffff); return b })
	if _, err := format.DecodeSpanMeta(v); !errors.Is(err, ErrCorruption) {
		t.Fatalf("65535 layers: %v", err)
	}
	v = append([]byte(nil), mv...)
	v[20] ^= 1
	if _, err := format.DecodeSpanMeta(v); !errors.Is(err, ErrCorruption) {
		t.Fatalf("bad crc: %v", err)
	}
}
