package tier

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/kvstore/kvstore/codec"
	"github.com/kvstore/kvstore/format"
)

func testHeader(t testing.TB) *Header {
	t.Helper()
	tr, err := New(Options{Endpoint: "http://127.0.0.1:1", Bucket: "b", PartSize: 4 << 10})
	if err != nil {
		t.Fatal(err)
	}
	p := testPacket("ns-a", testSpec(), 9, 1)
	p.AdapterID, p.HeaderTokens, p.BasePosition = "lora-7", 0, 12
	p.Codec, p.CodecOptions = format.CodecInt8, codec.Options{GroupSize: 32}
	h, _, err := tr.describe(p)
	if err != nil {
		t.Fatal(err)
	}
	for i := range h.PartCRCs {
		h.PartCRCs[i] = uint32(0x01020304 * (i + 1))
	}
	return h
}

func TestHeaderRoundTrip(t *testing.T) {
	h := testHeader(t)
	b, err := h.Encode()
	if err != nil {
		t.Fatal(err)
	}
	d, err := DecodeHeader(b)
	if err != nil {
		t.Fatal(err)
	}
	b2, err := d.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b, b2) {
		t.Fatal("re-encoding the decoded header gives other bytes")
	}
	if d.Parts() != 3 || d.PayloadLen() != 2*4*9*2*16*4 {
		t.Fatalf("parts %d, payload %d", d.Parts(), d.PayloadLen())
	}
	id := format.ComputePacketID("ns-a", h.Model.Fingerprint(), "lora-7", h.TokenIDs)
	if err := d.Matches("ns-a", h.Model.Fingerprint(), id); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"other namespace", d.Matches("ns-b", h.Model.Fingerprint(), id)},
		{"other model", d.Matches("ns-a", format.Fingerprint{1}, id)},
		{"other id", d.Matches("ns-a", h.Model.Fingerprint(), format.PacketID{2})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !errors.Is(tc.err, ErrCorruption) || !errors.Is(tc.err, format.ErrCorruption) {
				t.Errorf("%s: %v, want ErrCorruption", tc.name, tc.err)
			}
		})
	}
}

// TestDecodeHeaderRejects flips every byte, truncates at every length and
// breaks the fields a CRC cannot catch (re-sealed): each is an error, and
// ErrCorruption or ErrVersion.
func TestDecodeHeaderRejects(t *testing.T) {
	b, err := testHeader(t).Encode()
	if err != nil {
		t.Fatal(err)
	}
	want := func(t *testing.T, what string, err error) {
		t.Helper()
		if !errors.Is(err, ErrCorruption) && !errors.Is(err, format.ErrVersion) {
			t.Fatalf("%s: %v, want ErrCorruption or ErrVersion", what, err)
		}
	}
	for i := range b {
		c := bytes.Clone(b)
		c[i] ^= 0x10
		_, err := DecodeHeader(c)
		want(t, "flip", err)
	}
	for n := range len(b) {
		_, err := DecodeHeader(b[:n])
		want(t, "truncate", err)
	}
	reseal := func(mut func(*Header)) []byte {
		h := testHeader(t)
		mut(h)
		c, err := h.Encode()
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	for _, tc := range []struct {
		name string
		c    []byte
	}{
		{"chunk length", reseal(func(h *Header) { h.ChunkLen++ })},
		{"part count", reseal(func(h *Header) { h.PartCRCs = h.PartCRCs[1:] })},
		{"part size", reseal(func(h *Header) { h.PartSize = 1 })},
		{"codec", reseal(func(h *Header) { h.Codec = 200 })},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeHeader(tc.c)
			want(t, tc.name, err)
		})
	}
	c := bytes.Clone(b)
	binary.LittleEndian.PutUint16(c[4:], 2)
	if _, err := DecodeHeader(c); !errors.Is(err, format.ErrVersion) {
		t.Fatalf("version 2: %v, want ErrVersion", err)
	}
}

func FuzzDecodeHeader(f *testing.F) {
	b, err := testHeader(f).Encode()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Add(b[:len(b)/2])
	f.Add([]byte("KVTH"))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := DecodeHeader(b)
		if err != nil {
			return
		}
		// Whatever decodes re-encodes to the same bytes.
		c, err := h.Encode()
		if err != nil || !bytes.Equal(b, c) {
			t.Fatalf("decoded header re-encodes to other bytes (%v)", err)
		}
	})
}

func TestGather(t *testing.T) {
	chunks := [][]byte{[]byte("abcd"), []byte("efgh"), []byte("ijkl")}
	for off := range 12 {
		for n := range 12 - off + 1 {
			got := gather(make([]byte, n), chunks, 4, uint64(off))
			if want := "abcdefghijkl"[off : off+n]; string(got) != want {
				t.Fatalf("gather(%d, %d) = %q, want %q", off, n, got, want)
			}
		}
	}
}
