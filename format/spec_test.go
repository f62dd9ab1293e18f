package format

import (
	"errors"
	"strings"
	"testing"

	flatbuffers "github.com/google/flatbuffers/go"

	"github.com/kvstore/kvstore/format/fb"
)

// TestFingerprintPinned pins the fingerprints of existing specs: packet ids
// derive from them, so a change to Canonical that moves any of these orphans
// every stored packet. New RoPE fields must leave them as they are.
func TestFingerprintPinned(t *testing.T) {
	want := []struct {
		name string
		fp   string
	}{
		{"linear, max names", "b04b260ee295872e8422deb6326b32102b186a64258b5ceb899acf43478ea0c0"},
		{"llama3.1-8b", "1980f0c42267fc48b35b542c9e02a1d59d0010c9b6ed2afebfd0c9ae6eea371b"},
		{"qwen2.5-3b", "80fcdb9d7b70bf7a6437b5524985774cf49587c526593873d670e5cfe6c57bc0"},
		{"stories260K", "3f9d081da9826023325470fe4ddb72e2e97f39e6f48e4b273d9c4046965563f4"},
		{"yarn partial", "3374252605e42e26b9733901655706b8124c37e402307491abfae74c2f297c25"},
	}
	specs := testSpecs()
	for _, tc := range want {
		t.Run(tc.name, func(t *testing.T) {
			m, ok := specs[tc.name]
			if !ok {
				t.Errorf("%s: no longer in testSpecs", tc.name)
				return
			}
			if got := m.Fingerprint().String(); got != tc.fp {
				t.Errorf("%s: fingerprint %s, pinned %s", tc.name, got, tc.fp)
			}
		})
	}
}

// TestFingerprintNewRoPEFields checks that each field added to RoPE moves
// the fingerprint when set (so two models differing only there never share
// packets), and that the fields are refused outside YaRN.
func TestFingerprintNewRoPEFields(t *testing.T) {
	base := ModelSpec{Layers: 1, KVHeads: 1, HeadDim: 64, DType: DTypeBF16, RoPE: RoPE{Style: RoPERotateHalf,
		Theta: 10000, Scaling: RoPEScalingYaRN, Factor: 4, OriginalMaxPos: 4096, BetaFast: 32, BetaSlow: 1}}
	seen := map[Fingerprint]string{base.Fingerprint(): "base"}
	for _, tc := range []struct {
		name string
		edit func(*RoPE)
	}{
		{"no truncate", func(r *RoPE) { r.YaRNNoTruncate = true }},
		{"mscale", func(r *RoPE) { r.Mscale = 0.707 }},
		{"mscale all dim", func(r *RoPE) { r.MscaleAllDim = 0.707 }},
		{"both mscales", func(r *RoPE) { r.Mscale, r.MscaleAllDim = 0.707, 0.707 }},
		{"dynamic", func(r *RoPE) { r.Scaling, r.BetaFast, r.BetaSlow = RoPEScalingDynamic, 0, 0 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := base
			tc.edit(&m.RoPE)
			if err := m.Validate(); err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			fp := m.Fingerprint()
			if other, dup := seen[fp]; dup {
				t.Errorf("%s: same fingerprint as %s", tc.name, other)
			}
			seen[fp] = tc.name
		})
	}
	for _, s := range []RoPEScaling{RoPEScalingNone, RoPEScalingLinear, RoPEScalingDynamic} {
		m := base
		m.RoPE.Scaling, m.RoPE.Mscale = s, 1
		if err := m.Validate(); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("mscale under %v: Validate = %v, want ErrInvalidArgument", s, err)
		}
	}
	m := base
	m.RoPE.Scaling, m.RoPE.Factor = RoPEScalingDynamic, 0.5
	if err := m.Validate(); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("dynamic factor 0.5: Validate = %v, want ErrInvalidArgument", err)
	}
}

// TestDecodeModelSpecRejectsBadNoTruncate: yarn_no_truncate is a flag, and
// the new fields outside YaRN are refused, both as corruption.
func TestDecodeModelSpecRejectsBadNoTruncate(t *testing.T) {
	for _, tc := range []struct {
		name    string
		scaling RoPEScaling
		flag    byte
	}{
		{"flag 2", RoPEScalingYaRN, 2},
		{"flag under llama", RoPEScalingNone, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := flatbuffers.NewBuilder(128)
			fb.RopeStart(b)
			fb.RopeAddStyle(b, fb.RopeStyle(RoPERotateHalf))
			fb.RopeAddTheta(b, 10000)
			fb.RopeAddScaling(b, fb.RopeScaling(tc.scaling))
			fb.RopeAddFactor(b, 4)
			fb.RopeAddOriginalMaxPos(b, 4096)
			fb.RopeAddBetaFast(b, 32)
			fb.RopeAddBetaSlow(b, 1)
			fb.RopeAddYarnNoTruncate(b, tc.flag)
			rope := fb.RopeEnd(b)
			fb.ModelSpecStart(b)
			fb.ModelSpecAddLayers(b, 1)
			fb.ModelSpecAddKvHeads(b, 1)
			fb.ModelSpecAddHeadDim(b, 64)
			fb.ModelSpecAddDtype(b, fb.DType(DTypeBF16))
			fb.ModelSpecAddRope(b, rope)
			b.Finish(fb.ModelSpecEnd(b))
			v, err := Seal(KindModelSpec, b.FinishedBytes())
			if err != nil {
				t.Fatal(err)
			}
			if _, err := DecodeModelSpec(v); !errors.Is(err, ErrCorruption) {
				t.Errorf("%s: DecodeModelSpec = %v, want ErrCorruption", tc.name, err)
			}
		})
	}
}

func TestCheckNamespace(t *testing.T) {
	if err := CheckNamespace(strings.Repeat("n", MaxNameLen)); err != nil {
		t.Fatalf("namespace of MaxNameLen bytes: %v", err)
	}
	if err := CheckNamespace(strings.Repeat("n", MaxNameLen+1)); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("namespace of MaxNameLen+1 bytes: %v, want ErrInvalidArgument", err)
	}
}

// TestPacketIDPinned pins ComputePacketID's output on fixed inputs: a
// packet's id is its catalog key and is written in its trailer, so any
// change to the derivation orphans every stored packet. The long token
// list crosses the 1024-token batches the hash is fed in.
func TestPacketIDPinned(t *testing.T) {
	long := make([]uint32, 2500)
	for i := range long {
		long[i] = uint32(i) * 2654435761
	}
	for _, c := range []struct {
		ns      string
		model   Fingerprint
		adapter string
		tokens  []uint32
		want    string
	}{
		{"", Fingerprint{}, "", nil, "a7b5c5da45d8555ecc797875b1ea55942741c87893a9301dcf1330c961adc6d8"},
		{"ns", Fingerprint{1, 2, 3}, "", []uint32{1, 2, 3}, "53050ae5c05f3443e0473e139afd3c4709e9485798f2f4229a5acda32ce4cf90"},
		{"ns", Fingerprint{1, 2, 3}, "lora-x", []uint32{1, 2, 3}, "e0dd002aeeefc6761f957ea721acfbd97e6c1f0308f81991bacd190cd028b5c4"},
		{"tenant/ü", Fingerprint{0xff, 31: 0xee}, "a", long, "35d29634d542610ee4ecf30ae9d8f0c95c2329cf21791db47f787f571897d136"},
	} {
		if got := ComputePacketID(c.ns, c.model, c.adapter, c.tokens).String(); got != c.want {
			t.Errorf("ComputePacketID(%q, %x, %q, %d tokens) = %s, want %s", c.ns, c.model[:4], c.adapter, len(c.tokens), got, c.want)
		}
	}
}
