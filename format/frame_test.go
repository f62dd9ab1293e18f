package format

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
)

// testKind is a small record kind registered for these tests only.
var testKind = RegisterKind(RecordKind{Name: "test record", Magic: MagicOf("TST1"), Version: 3, MaxBody: 64})

func TestSealUnseal(t *testing.T) {
	for _, body := range [][]byte{nil, {}, []byte("x"), bytes.Repeat([]byte{0xa5}, 64)} {
		b, err := Seal(testKind, body)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) != FrameSize+len(body) || string(b[:4]) != "TST1" || binary.LittleEndian.Uint16(b[4:]) != 3 {
			t.Fatalf("frame %x", b[:FrameSize])
		}
		got, err := Unseal(testKind, b)
		if err != nil || !bytes.Equal(got, body) {
			t.Fatalf("Unseal = %q, %v; want %q", got, err, body)
		}
	}
	if _, err := Seal(testKind, make([]byte, 65)); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("oversized body: %v, want ErrInvalidArgument", err)
	}
}

func TestUnsealRejects(t *testing.T) {
	good, err := Seal(testKind, []byte("some body bytes"))
	if err != nil {
		t.Fatal(err)
	}
	// Every single-bit flip anywhere is corruption: the CRC covers the
	// prefix too, so no flip passes for a newer version.
	for i := range good {
		for bit := range 8 {
			b := bytes.Clone(good)
			b[i] ^= 1 << bit
			if _, err := Unseal(testKind, b); !errors.Is(err, ErrCorruption) {
				t.Fatalf("flip byte %d bit %d: %v, want ErrCorruption", i, bit, err)
			}
		}
	}
	for n := range len(good) {
		if _, err := Unseal(testKind, good[:n]); !errors.Is(err, ErrCorruption) {
			t.Fatalf("truncated to %d: %v", n, err)
		}
	}
	reseal := func(f func(b []byte)) []byte {
		b := bytes.Clone(good)
		f(b)
		binary.LittleEndian.PutUint32(b[12:], frameCRC(b))
		return b
	}
	for _, tc := range []struct {
		name string
		b    []byte
		want error
	}{
		{"other kind", mustSeal(t, KindModelSpec, []byte("some body bytes")), ErrCorruption},
		{"newer version", reseal(func(b []byte) { b[4] = 4 }), ErrVersion},
		{"older version", reseal(func(b []byte) { b[4] = 2 }), nil},
		{"version 0", reseal(func(b []byte) { b[4] = 0 }), ErrCorruption},
		{"reserved", reseal(func(b []byte) { b[7] = 1 }), ErrCorruption},
		{"over max body", reseal(func(b []byte) { binary.LittleEndian.PutUint32(b[8:], 65) }), ErrCorruption},
		{"length 2^32-1", reseal(func(b []byte) { binary.LittleEndian.PutUint32(b[8:], 1<<32-1) }), ErrCorruption},
		{"extra byte", append(bytes.Clone(good), 0), ErrCorruption},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Unseal(testKind, tc.b)
			if (tc.want == nil) != (err == nil) || (tc.want != nil && !errors.Is(err, tc.want)) {
				t.Fatalf("Unseal = %v, want %v", err, tc.want)
			}
		})
	}
}

func mustSeal(t *testing.T, k RecordKind, body []byte) []byte {
	t.Helper()
	b, err := Seal(k, body)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestKindRegistry(t *testing.T) {
	for _, k := range []RecordKind{KindPacketHeader, KindModelSpec, testKind} {
		b := mustSeal(t, k, nil)
		if got, ok := KindOf(b); !ok || got != k {
			t.Fatalf("KindOf(%q) = %+v, %v", b[:4], got, ok)
		}
	}
	if _, ok := KindOf([]byte("KVX")); ok {
		t.Fatal("KindOf of 3 bytes found a kind")
	}
	if _, ok := KindOf([]byte("NOPE")); ok {
		t.Fatal("KindOf of an unregistered magic found a kind")
	}
	for _, tc := range []struct {
		name string
		k    RecordKind
	}{
		{"duplicate magic", RecordKind{Name: "dup", Magic: MagicOf("KVPH"), Version: 1, MaxBody: 1}},
		{"version 0", RecordKind{Name: "v0", Magic: MagicOf("TSTV"), MaxBody: 1}},
		{"no max body", RecordKind{Name: "m0", Magic: MagicOf("TSTM"), Version: 1}},
		{"max body > 2^31", RecordKind{Name: "big", Magic: MagicOf("TSTB"), Version: 1, MaxBody: 1<<31 + 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Fatal("RegisterKind accepted it")
				}
			}()
			RegisterKind(tc.k)
		})
	}
}
