package format

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
)

func TestBlobFileRecordRoundTrip(t *testing.T) {
	r := BlobFileRecord{Size: 5 * Alignment, LiveBytes: 2 * Alignment, DeadBytes: Alignment, Extents: 4, LiveExtents: 2, Sealed: true}
	v := EncodeBlobFileRecord(&r)
	if len(v) != FrameSize+blobRecordSize || binary.LittleEndian.Uint32(v) != MagicOf("KVBF") {
		t.Fatalf("record of %d bytes, magic %x", len(v), v[:4])
	}
	got, err := DecodeBlobFileRecord(v)
	if err != nil || got != r {
		t.Fatalf("decoded %+v, %v; want %+v", got, err, r)
	}
	if n, err := DecodeSequence(EncodeSequence(12345)); err != nil || n != 12345 {
		t.Fatalf("sequence %d, %v", n, err)
	}
}

func TestBlobFileRecordRefusals(t *testing.T) {
	good := BlobFileRecord{Size: 3 * Alignment, LiveBytes: Alignment, DeadBytes: Alignment, Extents: 2, LiveExtents: 1}
	for _, tc := range []struct {
		name string
		edit func(b []byte)
	}{
		{"flags", func(b []byte) { b[0] = 2 }},
		{"reserved", func(b []byte) { b[12] = 1 }},
		{"unaligned", func(b []byte) { binary.LittleEndian.PutUint64(b[16:], 3*Alignment+1) }},
		{"inside head", func(b []byte) { binary.LittleEndian.PutUint64(b[16:], 0) }},
		{"live > size", func(b []byte) { binary.LittleEndian.PutUint64(b[24:], 4*Alignment) }},
		{"dead overrun", func(b []byte) { binary.LittleEndian.PutUint64(b[32:], 3*Alignment) }},
		{"live extents", func(b []byte) { binary.LittleEndian.PutUint32(b[8:], 3) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := bytes.Clone(EncodeBlobFileRecord(&good)[FrameSize:])
			tc.edit(body)
			v, err := Seal(KindBlobFile, body)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := DecodeBlobFileRecord(v); !errors.Is(err, ErrCorruption) {
				t.Errorf("%s: %v, want ErrCorruption", tc.name, err)
			}
		})
	}
	short, _ := Seal(KindBlobFile, make([]byte, blobRecordSize-1))
	if _, err := DecodeBlobFileRecord(short); !errors.Is(err, ErrCorruption) {
		t.Errorf("short body: %v", err)
	}
	if _, err := DecodeSequence(EncodeBlobFileRecord(&good)); !errors.Is(err, ErrCorruption) {
		t.Errorf("blob record read as a sequence: %v", err)
	}
	shortSeq, _ := Seal(KindSequence, []byte{1, 2, 3})
	if _, err := DecodeSequence(shortSeq); !errors.Is(err, ErrCorruption) {
		t.Errorf("short sequence: %v", err)
	}
}
