package fuzz

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/format/safetensors"
)

// FuzzSafetensors feeds whole safetensors files to the decoder: it never
// panics, never allocates more than a small multiple of its input, and a
// file that decodes re-encodes to one that decodes to the same tensors and
// metadata. Files that are KV packets go through DecodeKV and EncodeKV too.
func FuzzSafetensors(f *testing.F) {
	for _, b := range safetensorsSeeds(f) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		st, err := safetensors.Decode(b)
		runtime.ReadMemStats(&after)
		if got := after.TotalAlloc - before.TotalAlloc; got > 64*uint64(len(b))+64<<10 {
			t.Fatalf("decoding %d bytes allocated %d", len(b), got)
		}
		if err != nil {
			if !errors.Is(err, format.ErrCorruption) {
				t.Fatalf("error wraps no format sentinel: %v", err)
			}
			return
		}
		again, err := safetensors.Encode(st)
		if err != nil {
			t.Fatalf("decoded file does not encode: %v", err)
		}
		st2, err := safetensors.Decode(again)
		if err != nil {
			t.Fatalf("re-encoded file does not decode: %v", err)
		}
		if !sameFile(st, st2) {
			t.Fatalf("re-encoded file differs")
		}
		checkKV(t, st)
	})
}

func checkKV(t *testing.T, st *safetensors.File) {
	kv, err := safetensors.DecodeKV(st)
	if err != nil {
		if !errors.Is(err, format.ErrCorruption) {
			t.Fatalf("DecodeKV error wraps no format sentinel: %v", err)
		}
		return
	}
	f, err := safetensors.EncodeKV(kv)
	if err != nil {
		t.Fatalf("decoded KV does not encode: %v", err)
	}
	back, err := safetensors.DecodeKV(f)
	if err != nil || !back.Equal(kv) {
		t.Fatalf("KV round trip: %v", err)
	}
}

func sameFile(a, b *safetensors.File) bool {
	if len(a.Tensors) != len(b.Tensors) || len(a.Metadata) != len(b.Metadata) {
		return false
	}
	for k, v := range a.Metadata {
		if w, ok := b.Metadata[k]; !ok || w != v {
			return false
		}
	}
	for i := range a.Tensors {
		x, y := &a.Tensors[i], &b.Tensors[i]
		if x.Name != y.Name || x.DType != y.DType || string(x.Data) != string(y.Data) || fmt.Sprint(x.Shape) != fmt.Sprint(y.Shape) {
			return false
		}
	}
	return true
}

// safetensorsSeeds are a KV packet file, a plain file and broken ones.
func safetensorsSeeds(tb testing.TB) [][]byte {
	m := format.ModelSpec{Architecture: "llama", Layers: 1, KVHeads: 1, HeadDim: 2, DType: format.DTypeF16,
		RoPE: format.RoPE{Style: format.RoPEInterleaved, Theta: 10000}}
	kv := &safetensors.KV{Model: m, Namespace: "ns", TokenIDs: []uint32{1, 2}, K: [][]byte{make([]byte, 8)}, V: [][]byte{make([]byte, 8)}}
	f, err := safetensors.EncodeKV(kv)
	if err != nil {
		tb.Fatal(err)
	}
	good, err := safetensors.Encode(f)
	if err != nil {
		tb.Fatal(err)
	}
	raw := func(h string, buf int) []byte {
		b := binary.LittleEndian.AppendUint64(nil, uint64(len(h)))
		return append(append(b, h...), make([]byte, buf)...)
	}
	flipped := append([]byte(nil), good...)
	flipped[20] ^= 0x20
	return [][]byte{
		good,
		raw(`{"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},"b":{"dtype":"F64","shape":[],"data_offsets":[2,10]}}`, 10),
		raw(`{"__metadata__":{"k":"v"}}`, 0),
		good[:len(good)/2],
		flipped,
		raw(`{"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,0]}}`, 0),
		raw(`{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}}`, 2),
	}
}

// TestWriteSafetensorsCorpus rewrites testdata/fuzz/FuzzSafetensors/seed-*
// from the seeds above; it only runs when asked.
func TestWriteSafetensorsCorpus(t *testing.T) {
	if os.Getenv("KVSTORE_WRITE_CORPUS") == "" {
		t.Skip("set KVSTORE_WRITE_CORPUS=1 to rewrite the seed corpus")
	}
	dir := filepath.Join("testdata", "fuzz", "FuzzSafetensors")
	for i, in := range safetensorsSeeds(t) {
		data := "go test fuzz v1\n[]byte(" + strconv.Quote(string(in)) + ")\n"
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("seed-%d", i)), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
