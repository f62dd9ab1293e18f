package format

import (
	"bytes"
	"encoding/binary"
	"errors"
	"maps"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// testSpecs are valid specs covering every RoPE style and scaling.
func testSpecs() map[string]*ModelSpec {
	negZero := math.Copysign(0, -1)
	return map[string]*ModelSpec{
		"llama3.1-8b": {Architecture: "llama", Layers: 32, KVHeads: 8, HeadDim: 128, DType: DTypeBF16,
			RoPE: RoPE{Style: RoPERotateHalf, Theta: 500000, Scaling: RoPEScalingLlama3, Factor: 8,
				LowFreqFactor: 1, HighFreqFactor: 4, OriginalMaxPos: 8192}, WeightsID: "meta-llama/Llama-3.1-8B"},
		"qwen2.5-3b": {Architecture: "qwen2", Layers: 36, KVHeads: 2, HeadDim: 128, DType: DTypeF16,
			RoPE: RoPE{Style: RoPERotateHalf, Theta: 1e6}},
		"stories260K": {Architecture: "llama2.c", Layers: 5, KVHeads: 4, HeadDim: 8, DType: DTypeF32,
			RoPE: RoPE{Style: RoPEInterleaved, Theta: 10000}, WeightsID: "stories260K"},
		"yarn partial": {Layers: 1, KVHeads: 1, HeadDim: 65, DType: DTypeBF16,
			RoPE: RoPE{Style: RoPEInterleaved, RotaryDims: 32, Theta: 10000, Scaling: RoPEScalingYaRN, Factor: 4,
				OriginalMaxPos: 4096, BetaFast: 32, BetaSlow: 1, AttentionFactor: negZero}},
		"deepseek yarn": {Architecture: "deepseek_v3", Layers: 61, KVHeads: 1, HeadDim: 64, DType: DTypeBF16,
			RoPE: RoPE{Style: RoPEInterleaved, Theta: 10000, Scaling: RoPEScalingYaRN, Factor: 40,
				OriginalMaxPos: 4096, BetaFast: 32, BetaSlow: 1, Mscale: 1, MscaleAllDim: 1, YaRNNoTruncate: true}},
		"dynamic": {Architecture: "llama", Layers: 2, KVHeads: 2, HeadDim: 64, DType: DTypeF16,
			RoPE: RoPE{Style: RoPERotateHalf, Theta: 10000, Scaling: RoPEScalingDynamic, Factor: 2, OriginalMaxPos: 2048}},
		"linear, max names": {Architecture: strings.Repeat("a", MaxNameLen), Layers: MaxLayers, KVHeads: MaxKVHeads,
			HeadDim: MaxHeadDim, DType: DTypeF32, WeightsID: strings.Repeat("w", MaxNameLen),
			RoPE: RoPE{Style: RoPERotateHalf, Theta: 1.5, Scaling: RoPEScalingLinear, Factor: 2, OriginalMaxPos: -3,
				LowFreqFactor: negZero}},
	}
}

func TestModelSpecRoundTrip(t *testing.T) {
	specs := testSpecs()
	for _, name := range slices.Sorted(maps.Keys(specs)) {
		m := specs[name]
		t.Run(name, func(t *testing.T) {
			b, err := EncodeModelSpec(m)
			if err != nil {
				t.Fatal(err)
			}
			got, err := DecodeModelSpec(b)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, m) {
				t.Fatalf("round trip:\n got %+v\nwant %+v", got, m)
			}
			if got.Fingerprint() != m.Fingerprint() {
				t.Fatal("fingerprint changed in a round trip (negative zero lost?)")
			}
		})
	}
}

func TestModelSpecRejects(t *testing.T) {
	base := testSpecs()["llama3.1-8b"]
	for _, tc := range []struct {
		name string
		f    func(m *ModelSpec)
	}{
		{"zero layers", func(m *ModelSpec) { m.Layers = 0 }},
		{"int8", func(m *ModelSpec) { m.DType = DTypeInt8 }},
		{"no rope style", func(m *ModelSpec) { m.RoPE.Style = 0 }},
		{"bad theta", func(m *ModelSpec) { m.RoPE.Theta = 1 }},
		{"nan factor", func(m *ModelSpec) { m.RoPE.Factor = math.NaN() }},
		{"llama3 no orig", func(m *ModelSpec) { m.RoPE.OriginalMaxPos = 0 }},
		{"odd rotary dims", func(m *ModelSpec) { m.RoPE.RotaryDims = 3 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := *base
			tc.f(&m)
			if _, err := EncodeModelSpec(&m); !errors.Is(err, ErrInvalidArgument) {
				t.Fatalf("EncodeModelSpec = %v, want ErrInvalidArgument", err)
			}
			b, err := Seal(KindModelSpec, buildModelSpec(&m))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := DecodeModelSpec(b); !errors.Is(err, ErrCorruption) {
				t.Fatalf("DecodeModelSpec = %v, want ErrCorruption", err)
			}
		})
	}
}

func TestDecodeModelSpecHostile(t *testing.T) {
	good, err := EncodeModelSpec(testSpecs()["qwen2.5-3b"])
	if err != nil {
		t.Fatal(err)
	}
	for n := 0; n < len(good); n++ {
		if _, err := DecodeModelSpec(good[:n]); !errors.Is(err, ErrCorruption) {
			t.Fatalf("truncated to %d bytes: %v", n, err)
		}
	}
	hdr, _ := EncodeHeader(testHeader(smallShape))
	if _, err := DecodeModelSpec(hdr); !errors.Is(err, ErrCorruption) {
		t.Fatalf("a header decoded as a model spec: %v", err)
	}
	// Every single-bit flip of the body, re-sealed: verifier or Validate
	// must catch it, or the result must be a valid spec.
	for i := FrameSize; i < len(good); i++ {
		for bit := 0; bit < 8; bit++ {
			b := bytes.Clone(good)
			b[i] ^= 1 << bit
			binary.LittleEndian.PutUint32(b[12:], frameCRC(b))
			m, err := decodeModelSpecBody(b[FrameSize:])
			if err != nil {
				if !errors.Is(err, ErrCorruption) && !errors.Is(err, ErrVersion) {
					t.Fatalf("byte %d bit %d: %v", i, bit, err)
				}
				continue
			}
			if err := m.Validate(); err != nil {
				t.Fatalf("byte %d bit %d: decoded an invalid spec: %v", i, bit, err)
			}
		}
	}
}
