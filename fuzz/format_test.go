package fuzz

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/kvstore/kvstore/format"
)

// checkErr fails on an error that wraps no format sentinel, and on one the
// decoders' last-resort recover made: that is a verifier gap, a bug.
func checkErr(t *testing.T, err error) {
	t.Helper()
	if !errors.Is(err, format.ErrCorruption) && !errors.Is(err, format.ErrVersion) {
		t.Fatalf("error wraps no format sentinel: %v", err)
	}
	if strings.Contains(err.Error(), "decoder panicked") {
		t.Fatalf("the decoder panicked and was caught by its guard: %v", err)
	}
}

// FuzzDecodeHeader feeds whole catalog values, frame and CRC included.
func FuzzDecodeHeader(f *testing.F) {
	for _, b := range headerSeeds(f) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) { checkHeader(t, b) })
}

// FuzzDecodeHeaderBody feeds FlatBuffer bodies sealed with a correct CRC, so
// that the fuzzer reaches the verifier instead of the checksum.
func FuzzDecodeHeaderBody(f *testing.F) {
	for _, b := range headerSeeds(f) {
		if len(b) > format.FrameSize {
			f.Add(b[format.FrameSize:])
		}
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		b, err := format.Seal(format.KindPacketHeader, body)
		if err != nil {
			return // over the size limit
		}
		checkHeader(t, b)
	})
}

func checkHeader(t *testing.T, b []byte) {
	h, err := format.DecodeHeader(b)
	if err != nil {
		checkErr(t, err)
		return
	}
	if err := h.Validate(); err != nil {
		t.Fatalf("decoded header is invalid: %v", err)
	}
	again, err := format.EncodeHeader(h)
	if err != nil {
		t.Fatalf("decoded header does not encode: %v", err)
	}
	h2, err := format.DecodeHeader(again)
	if err != nil || !reflect.DeepEqual(h, h2) {
		t.Fatalf("re-encoded header decodes to %+v, %v; want %+v", h2, err, h)
	}
}

// FuzzDecodeModelSpec feeds whole model spec values.
func FuzzDecodeModelSpec(f *testing.F) {
	for _, b := range specSeeds(f) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) { checkSpec(t, b) })
}

// FuzzDecodeModelSpecBody feeds model spec bodies sealed with a correct CRC.
func FuzzDecodeModelSpecBody(f *testing.F) {
	for _, b := range specSeeds(f) {
		if len(b) > format.FrameSize {
			f.Add(b[format.FrameSize:])
		}
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		b, err := format.Seal(format.KindModelSpec, body)
		if err != nil {
			return
		}
		checkSpec(t, b)
	})
}

func checkSpec(t *testing.T, b []byte) {
	m, err := format.DecodeModelSpec(b)
	if err != nil {
		checkErr(t, err)
		return
	}
	again, err := format.EncodeModelSpec(m)
	if err != nil {
		t.Fatalf("decoded spec does not encode: %v", err)
	}
	m2, err := format.DecodeModelSpec(again)
	if err != nil || !reflect.DeepEqual(m, m2) || m.Fingerprint() != m2.Fingerprint() {
		t.Fatalf("re-encoded spec decodes to %+v, %v; want %+v", m2, err, m)
	}
}

// FuzzDecodeFormatFile feeds FORMAT files.
func FuzzDecodeFormatFile(f *testing.F) {
	good := format.EncodeFormatFile(format.Current)
	f.Add(good)
	f.Add(good[:10])
	f.Add(format.EncodeFormatFile(format.Version{Major: format.FormatMajor + 1}))
	f.Add(flip(good, 17))
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := format.DecodeFormatFile(b)
		if err != nil {
			checkErr(t, err)
			return
		}
		// The encoding is canonical: every byte is checked.
		if again := format.EncodeFormatFile(v); !bytes.Equal(again, b) {
			t.Fatalf("FORMAT %x decodes to %v, which encodes to %x", b, v, again)
		}
	})
}

// FuzzDecodeTrailer feeds extent trailers.
func FuzzDecodeTrailer(f *testing.F) {
	tr := format.Trailer{Packet: format.PacketID{1, 2, 3}, Offset: 2 * format.Alignment, PayloadLen: 12345, PayloadCRC: 0xabcdef}
	good := tr.Encode()
	f.Add(good)
	f.Add(good[:63])
	f.Add(flip(good, 40))
	bad := format.Trailer{Offset: 100, PayloadLen: 1 << 63}
	f.Add(bad.Encode())
	f.Fuzz(func(t *testing.T, b []byte) {
		tr, err := format.DecodeTrailer(b)
		if err != nil {
			checkErr(t, err)
			return
		}
		if again := tr.Encode(); !bytes.Equal(again, b) {
			t.Fatalf("trailer %x decodes to %+v, which encodes to %x", b, tr, again)
		}
	})
}

// FuzzDecodeBlobHeader feeds blob file headers.
func FuzzDecodeBlobHeader(f *testing.F) {
	good := format.EncodeBlobHeader(7)
	f.Add(good)
	f.Add(good[:20])
	f.Add(good[:19])
	f.Add(flip(good, 12))
	f.Fuzz(func(t *testing.T, b []byte) {
		num, err := format.DecodeBlobHeader(b)
		if err != nil {
			checkErr(t, err)
			return
		}
		again := format.EncodeBlobHeader(num)
		if n2, err := format.DecodeBlobHeader(again); err != nil || n2 != num {
			t.Fatalf("blob header %d re-encodes to one decoding as %d, %v", num, n2, err)
		}
		if !bytes.Equal(again[:10], b[:10]) {
			t.Fatalf("blob header %x: re-encoding changed magic or version: %x", b[:20], again[:20])
		}
	})
}

// flip returns b with one bit of byte i flipped.
func flip(b []byte, i int) []byte {
	b = bytes.Clone(b)
	b[i] ^= 0x04
	return b
}
