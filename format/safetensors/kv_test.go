package safetensors

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/kvstore/kvstore/format"
)

// testKV is a small packet cache with distinct bytes everywhere.
func testKV() *KV {
	m := format.ModelSpec{Architecture: "llama", Layers: 2, KVHeads: 2, HeadDim: 4, DType: format.DTypeBF16, WeightsID: "w",
		RoPE: format.RoPE{Style: format.RoPERotateHalf, Theta: 500000, Scaling: format.RoPEScalingLlama3,
			Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OriginalMaxPos: 8192}}
	kv := &KV{Model: m, Namespace: "ns", AdapterID: "ad", HeaderTokens: 1, TrailerTokens: 1,
		TokenIDs: []uint32{5, 6, 7}, BasePosition: 17}
	n := m.KVHeads * kv.Tokens() * m.HeadDim * 2
	for l := range m.Layers {
		k, v := make([]byte, n), make([]byte, n)
		for i := range n {
			k[i], v[i] = byte(l*7+i), byte(l*11+i*3)
		}
		kv.K, kv.V = append(kv.K, k), append(kv.V, v)
	}
	return kv
}

func TestKVRoundTrip(t *testing.T) {
	kv := testKV()
	f, err := EncodeKV(kv)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Encode(f)
	if err != nil {
		t.Fatal(err)
	}
	g, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if got := g.Tensor(NameKV).Shape; len(got) != 6 || got[0] != 2 || got[1] != 2 || got[2] != 1 || got[4] != 5 {
		t.Fatalf("kv shape %v", got)
	}
	back, err := DecodeKV(g)
	if err != nil {
		t.Fatal(err)
	}
	if !back.Equal(kv) {
		t.Fatalf("round trip differs:\n%+v\n%+v", back, kv)
	}
}

// Per-layer k.{l}/v.{l} tensors (with or without the batch dimension) are
// read the same as "kv".
func TestKVPerLayer(t *testing.T) {
	kv := testKV()
	f, err := EncodeKV(kv)
	if err != nil {
		t.Fatal(err)
	}
	m := kv.Model
	row := []uint64{uint64(m.KVHeads), uint64(kv.Tokens()), uint64(m.HeadDim)}
	per := &File{Metadata: f.Metadata, Tensors: []Tensor{*f.Tensor(NamePositions)}}
	for l := range m.Layers {
		shape := row
		if l == 1 {
			shape = append([]uint64{1}, row...)
		}
		per.Tensors = append(per.Tensors,
			Tensor{Name: "k." + strconv.Itoa(l), DType: BF16, Shape: shape, Data: kv.K[l]},
			Tensor{Name: "v." + strconv.Itoa(l), DType: BF16, Shape: shape, Data: kv.V[l]})
	}
	b, err := Encode(per)
	if err != nil {
		t.Fatal(err)
	}
	g, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	back, err := DecodeKV(g)
	if err != nil {
		t.Fatal(err)
	}
	if !back.Equal(kv) {
		t.Fatalf("per-layer import differs")
	}
}

func TestDecodeKVBad(t *testing.T) {
	for _, tc := range []struct {
		name, want string
		edit       func(f *File)
	}{
		{"no model", MetaModel, func(f *File) { delete(f.Metadata, MetaModel) }},
		{"bad model json", MetaModel, func(f *File) { f.Metadata[MetaModel] = `{"layers":"x"}` }},
		{"unknown model field", MetaModel, func(f *File) { f.Metadata[MetaModel] = strings.Replace(f.Metadata[MetaModel], "{", `{"x":1,`, 1) }},
		{"fingerprint", MetaFingerprint, func(f *File) { f.Metadata[MetaFingerprint] = "00" }},
		{"packet id", MetaPacketID, func(f *File) { f.Metadata[MetaPacketID] = "00" }},
		{"no token ids", MetaTokenIDs, func(f *File) { delete(f.Metadata, MetaTokenIDs) }},
		{"token count", "kv", func(f *File) { f.Metadata[MetaTokenIDs] = "[1]" }},
		{"negative header", MetaHeaderTokens, func(f *File) { f.Metadata[MetaHeaderTokens] = "-1" }},
		{"wrong dtype", "kv", func(f *File) { f.Tensor(NameKV).DType = F16 }},
		{"positions", NamePositions, func(f *File) { f.Tensor(NamePositions).Data[8] = 9 }},
		{"extra tensor", "not part", func(f *File) { f.Tensors = append(f.Tensors, Tensor{Name: "x", DType: U8}) }},
		{"no kv", "no tensor", func(f *File) { f.Tensors = f.Tensors[1:] }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := EncodeKV(testKV())
			if err != nil {
				t.Fatal(err)
			}
			tc.edit(f)
			if _, err := DecodeKV(f); !errors.Is(err, format.ErrCorruption) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("DecodeKV: %v, want corruption mentioning %q", err, tc.want)
			}
		})
	}
}

// TestKVRoundTripRoPEVariants: dynamic NTK and YaRN's truncate and mscale
// fields survive an export and import, fingerprint included.
func TestKVRoundTripRoPEVariants(t *testing.T) {
	for _, tc := range []struct {
		name string
		r    format.RoPE
	}{
		{"dynamic", format.RoPE{Style: format.RoPERotateHalf, Theta: 10000, Scaling: format.RoPEScalingDynamic, Factor: 2, OriginalMaxPos: 2048}},
		{"deepseek yarn", format.RoPE{Style: format.RoPEInterleaved, Theta: 10000, Scaling: format.RoPEScalingYaRN, Factor: 40,
			OriginalMaxPos: 4096, BetaFast: 32, BetaSlow: 1, YaRNNoTruncate: true, Mscale: 0.707, MscaleAllDim: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kv := testKV()
			kv.Model.RoPE = tc.r
			f, err := EncodeKV(kv)
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			b, err := Encode(f)
			if err != nil {
				t.Fatal(err)
			}
			g, err := Decode(b)
			if err != nil {
				t.Fatal(err)
			}
			back, err := DecodeKV(g)
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			if !back.Equal(kv) || back.Model.Fingerprint() != kv.Model.Fingerprint() {
				t.Fatalf("%s: round trip differs:\n%+v\n%+v", tc.name, back.Model.RoPE, kv.Model.RoPE)
			}
		})
	}
}
