package safetensors

import (
	"bytes"
	"errors"
	"testing"
)

// WriteKV writes the bytes Encode(EncodeKV(kv)) does, filling the layers
// in file order, one buffer of one layer at a time.
func TestWriteKVSameBytes(t *testing.T) {
	kv := testKV()
	f, err := EncodeKV(kv)
	if err != nil {
		t.Fatal(err)
	}
	want, err := Encode(f)
	if err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	next := 0
	var bufs [][]byte
	n, err := WriteKV(&got, &KV{Model: kv.Model, Namespace: kv.Namespace, AdapterID: kv.AdapterID, HeaderTokens: kv.HeaderTokens,
		TrailerTokens: kv.TrailerTokens, TokenIDs: kv.TokenIDs, BasePosition: kv.BasePosition, KeyPosition: kv.KeyPosition},
		func(half, l int, buf []byte) error {
			if half*kv.Model.Layers+l != next {
				t.Fatalf("fill(%d, %d) out of order", half, l)
			}
			next++
			bufs = append(bufs, buf)
			copy(buf, [][][]byte{kv.K, kv.V}[half][l])
			return nil
		})
	if err != nil || n != int64(len(want)) || !bytes.Equal(got.Bytes(), want) {
		t.Fatalf("WriteKV: %d bytes, %v; equal to Encode: %v", n, err, bytes.Equal(got.Bytes(), want))
	}
	if next != 2*kv.Model.Layers || &bufs[0][0] != &bufs[len(bufs)-1][0] {
		t.Fatalf("fill called %d times, or with more than one buffer", next)
	}
	stop := errors.New("stop")
	if _, err := WriteKV(&got, kv, func(int, int, []byte) error { return stop }); !errors.Is(err, stop) {
		t.Fatalf("fill's error: %v", err)
	}
}
