package format

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
)

// flips calls f with every single-bit flip of b.
func flips(b []byte, f func(i, bit int, c []byte)) {
	for i := range b {
		for bit := range 8 {
			c := bytes.Clone(b)
			c[i] ^= 1 << bit
			f(i, bit, c)
		}
	}
}

func TestFormatFile(t *testing.T) {
	b := EncodeFormatFile(Current)
	if v, err := DecodeFormatFile(b); err != nil || v != Current {
		t.Fatalf("DecodeFormatFile = %v, %v", v, err)
	}
	older := Version{1, 7}
	if v, err := DecodeFormatFile(EncodeFormatFile(older)); err != nil || v != older {
		t.Fatalf("minor version: %v, %v", v, err)
	}
	if _, err := DecodeFormatFile(EncodeFormatFile(Version{FormatMajor + 1, 0})); !errors.Is(err, ErrVersion) {
		t.Fatalf("newer major: %v, want ErrVersion", err)
	}
	if _, err := DecodeFormatFile(EncodeFormatFile(Version{0, 1})); !errors.Is(err, ErrCorruption) {
		t.Fatalf("major 0: %v, want ErrCorruption", err)
	}
	flags := bytes.Clone(b)
	flags[12] = 1
	binary.LittleEndian.PutUint32(flags[16:], CRC(flags[:16]))
	if _, err := DecodeFormatFile(flags); !errors.Is(err, ErrCorruption) {
		t.Fatalf("unknown flags: %v", err)
	}
	flips(b, func(i, bit int, c []byte) {
		if _, err := DecodeFormatFile(c); !errors.Is(err, ErrCorruption) {
			t.Fatalf("flip byte %d bit %d: %v, want ErrCorruption", i, bit, err)
		}
	})
	for n := 0; n <= FormatFileSize+1; n++ {
		if n == FormatFileSize {
			continue
		}
		c := append(bytes.Clone(b), 0)[:n]
		if _, err := DecodeFormatFile(c); !errors.Is(err, ErrCorruption) {
			t.Fatalf("%d bytes: %v", n, err)
		}
	}
}

// The released versions are in order, Current is the newest, and
// Compare orders majors before minors.
func TestVersions(t *testing.T) {
	released := []Version{Version10, Version11, Version12}
	for i := 1; i < len(released); i++ {
		if released[i-1].Compare(released[i]) != -1 || released[i].Compare(released[i-1]) != 1 {
			t.Fatalf("%v and %v out of order", released[i-1], released[i])
		}
	}
	if Current != released[len(released)-1] {
		t.Fatalf("Current %v is not the newest released version %v", Current, released[len(released)-1])
	}
	for _, tc := range []struct {
		a, b Version
		want int
	}{
		{Version{1, 9}, Version{2, 0}, -1},
		{Version{2, 0}, Version{1, 9}, 1},
		{Version{1, 2}, Version{1, 2}, 0},
	} {
		if got := tc.a.Compare(tc.b); got != tc.want {
			t.Fatalf("%v.Compare(%v) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}

// BlobHeaderVersion returns the version of the code that wrote the header,
// with DecodeBlobHeader's errors.
func TestBlobHeaderVersion(t *testing.T) {
	b := EncodeBlobHeader(9)
	if v, err := BlobHeaderVersion(b); v != Current || err != nil {
		t.Fatalf("BlobHeaderVersion = %v, %v", v, err)
	}
	binary.LittleEndian.PutUint16(b[10:], 7)
	binary.LittleEndian.PutUint32(b[16:], CRC(b[:16]))
	if v, err := BlobHeaderVersion(b); v != (Version{FormatMajor, 7}) || err != nil {
		t.Fatalf("newer minor: %v, %v", v, err)
	}
	binary.LittleEndian.PutUint16(b[8:], FormatMajor+1)
	binary.LittleEndian.PutUint32(b[16:], CRC(b[:16]))
	if _, err := BlobHeaderVersion(b); !errors.Is(err, ErrVersion) {
		t.Fatalf("newer major: %v, want ErrVersion", err)
	}
	b[0] ^= 1
	if _, err := BlobHeaderVersion(b); !errors.Is(err, ErrCorruption) {
		t.Fatalf("damaged: %v, want ErrCorruption", err)
	}
}

func TestBlobHeader(t *testing.T) {
	b := EncodeBlobHeader(123456)
	if len(b) != BlobHeaderSize || !bytes.Equal(b[blobHeaderUsed:], make([]byte, BlobHeaderSize-blobHeaderUsed)) {
		t.Fatal("blob header is not 4 KiB of fields and zero padding")
	}
	if n, err := DecodeBlobHeader(b); err != nil || n != 123456 {
		t.Fatalf("DecodeBlobHeader = %d, %v", n, err)
	}
	flips(b[:blobHeaderUsed], func(i, bit int, c []byte) {
		if _, err := DecodeBlobHeader(c); !errors.Is(err, ErrCorruption) {
			t.Fatalf("flip byte %d bit %d: %v, want ErrCorruption", i, bit, err)
		}
	})
	for n := range blobHeaderUsed {
		if _, err := DecodeBlobHeader(b[:n]); !errors.Is(err, ErrCorruption) {
			t.Fatalf("%d bytes: %v", n, err)
		}
	}
	newer := bytes.Clone(b)
	binary.LittleEndian.PutUint16(newer[8:], FormatMajor+1)
	binary.LittleEndian.PutUint32(newer[16:], CRC(newer[:16]))
	if _, err := DecodeBlobHeader(newer); !errors.Is(err, ErrVersion) {
		t.Fatalf("newer major: %v, want ErrVersion", err)
	}
	binary.LittleEndian.PutUint16(newer[8:], 0)
	binary.LittleEndian.PutUint32(newer[16:], CRC(newer[:16]))
	if _, err := DecodeBlobHeader(newer); !errors.Is(err, ErrCorruption) {
		t.Fatalf("major 0: %v, want ErrCorruption", err)
	}
}

func TestTrailer(t *testing.T) {
	tr := Trailer{Packet: PacketID{0xaa, 0xbb}, Offset: 3 * Alignment, PayloadLen: 1<<40 + 5, PayloadCRC: 0x12345678}
	b := tr.Encode()
	if got, err := DecodeTrailer(b); err != nil || got != tr {
		t.Fatalf("DecodeTrailer = %+v, %v", got, err)
	}
	flips(b, func(i, bit int, c []byte) {
		if _, err := DecodeTrailer(c); !errors.Is(err, ErrCorruption) {
			t.Fatalf("flip byte %d bit %d: %v, want ErrCorruption", i, bit, err)
		}
	})
	for _, tc := range []struct {
		name string
		bad  Trailer
	}{
		{"offset misaligned", Trailer{Offset: 3*Alignment + 64}},
		{"offset in blob hdr", Trailer{Offset: 0}},
		{"payload overflows", Trailer{Offset: Alignment, PayloadLen: 1<<64 - 10}},
		{"extent end overflow", Trailer{Offset: 1<<64 - Alignment, PayloadLen: 2 * Alignment}},
		{"trailer end wraps", Trailer{Offset: 1<<64 - 2*Alignment, PayloadLen: Alignment}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := DecodeTrailer(tc.bad.Encode()); !errors.Is(err, ErrCorruption) {
				t.Errorf("%s: %v, want ErrCorruption", tc.name, err)
			}
		})
	}
	if _, err := DecodeTrailer(b[:TrailerSize-1]); !errors.Is(err, ErrCorruption) {
		t.Fatalf("short trailer: %v", err)
	}
}

func TestExtentLength(t *testing.T) {
	for _, tc := range []struct {
		payload, want uint64
		ok            bool
	}{
		{0, Alignment, true},
		{1, Alignment, true},
		{Alignment - TrailerSize, Alignment, true},
		{Alignment - TrailerSize + 1, 2 * Alignment, true},
		{1<<64 - TrailerSize, 0, false},
		{1<<64 - TrailerSize - 1, 0, false}, // fits with the trailer, not once aligned
	} {
		got, ok := ExtentLength(tc.payload)
		if ok != tc.ok || (ok && got != tc.want) {
			t.Errorf("ExtentLength(%d) = %d, %v; want %d, %v", tc.payload, got, ok, tc.want, tc.ok)
		}
	}
	if _, ok := AlignUp(1<<64-1, ChunkAlignment); ok {
		t.Error("AlignUp(2^64-1) did not report overflow")
	}
	if got, ok := AlignUp(65, ChunkAlignment); !ok || got != 128 {
		t.Errorf("AlignUp(65, 64) = %d, %v", got, ok)
	}
}
