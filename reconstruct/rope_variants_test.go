package reconstruct

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/kvstore/kvstore/format"
)

// The RoPE variants HF transformers defines in modeling_rope_utils beyond
// the ones in rope_test.go: dynamic NTK, YaRN with truncate = false, and
// YaRN's DeepSeek-style mscale / mscale_all_dim attention factor. Expected
// values are float64 closed forms worked out here, and literals from an
// independent float64 script of HF's formulas.

var ropeDynamic2 = format.RoPE{Style: format.RoPEInterleaved, Theta: 10000,
	Scaling: format.RoPEScalingDynamic, Factor: 2, OriginalMaxPos: 16}

// TestDynamicNTK: with d = 8 rotary dims, factor 2 and M = 16, a sequence of
// L = 32 tokens has base 10000*(2*32/16-1)^(8/6) = 10000*3^(4/3), so pair j
// turns at 10000^(-j/4) * 3^(-j/3): pair 3 at exactly 0.001/3. Lengths up to
// M keep the plain base.
func TestDynamicNTK(t *testing.T) {
	r := mustRoPE(t, ropeDynamic2, 8)
	if r.Length() != 16 {
		t.Fatalf("NewRoPE Length %d, want OriginalMaxPos 16", r.Length())
	}
	plain := []float64{1, 0.1, 0.01, 0.001}
	for _, l := range []int{0, 1, 15, 16} {
		got := r.AtLength(l)
		if got != r {
			t.Errorf("AtLength(%d) built a new RoPE; want the plain one", l)
		}
		for j, f := range got.InvFreq() {
			if math.Abs(f-plain[j]) > 1e-15 {
				t.Errorf("AtLength(%d) pair %d: %v, want %v", l, j, f, plain[j])
			}
		}
	}
	long := r.AtLength(32)
	if long.Length() != 32 {
		t.Fatalf("AtLength(32).Length() = %d", long.Length())
	}
	for j, f := range long.InvFreq() {
		want := math.Pow(10000, -float64(j)/4) * math.Pow(3, -float64(j)/3)
		if math.Abs(f-want) > 1e-13*want {
			t.Errorf("L=32 pair %d: inv freq %.17g, want %.17g", j, f, want)
		}
	}
	if f := long.InvFreq()[3]; math.Abs(f-0.001/3) > 1e-18 {
		t.Errorf("L=32 pair 3: %.17g, want 0.001/3", f)
	}
	// Literal from the independent script: pair 1 at L=32.
	if f := long.InvFreq()[1]; math.Abs(f-0.06933612743506347) > 1e-15 {
		t.Errorf("L=32 pair 1: %.17g, want 0.06933612743506347", f)
	}
	if long.AttentionScale() != 1 || long.AtLength(32) != long || long.AtLength(8).Length() != 16 {
		t.Error("dynamic: attention scale is not 1, or AtLength does not go back to the plain base")
	}
	// Other scalings ignore the length.
	if y := mustRoPE(t, ropeYaRN4, 128); y.AtLength(1<<20) != y || y.Length() != 0 {
		t.Error("yarn: AtLength built a new RoPE")
	}
}

func TestDynamicNTKRejects(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  format.RoPE
	}{
		{"factor below 1", format.RoPE{Style: format.RoPERotateHalf, Theta: 10000, Scaling: format.RoPEScalingDynamic, Factor: 0.5, OriginalMaxPos: 16}},
		{"no max pos", format.RoPE{Style: format.RoPERotateHalf, Theta: 10000, Scaling: format.RoPEScalingDynamic, Factor: 2}},
		{"two rotary", format.RoPE{Style: format.RoPERotateHalf, Theta: 10000, Scaling: format.RoPEScalingDynamic, Factor: 2, OriginalMaxPos: 16, RotaryDims: 2}},
		{"mscale", format.RoPE{Style: format.RoPERotateHalf, Theta: 10000, Scaling: format.RoPEScalingDynamic, Factor: 2, OriginalMaxPos: 16, Mscale: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := NewRoPE(tc.cfg, 8); !errors.Is(err, format.ErrInvalidArgument) {
				t.Errorf("%s: NewRoPE = %v, want ErrInvalidArgument", tc.name, err)
			}
		})
	}
}

// TestDynamicReRotate: a key rotated at position p under the plain base,
// re-rotated into a sequence of 40 tokens at position q, equals the key
// rotated directly at q under AtLength(40) (to float32 rounding).
func TestDynamicReRotate(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	r := mustRoPE(t, ropeDynamic2, 8)
	long := r.AtLength(40)
	x := ropeRandVec(rng, 8)
	moved := append([]float32(nil), x...)
	r.Rotate(moved, 5)
	ReRotate(moved, r, 5, long, 33)
	want := ropeRef(long, x, 33)
	for i := range moved {
		if math.Abs(float64(moved[i])-want[i]) > 1e-5 {
			t.Fatalf("dim %d: re-rotated %v, want %v", i, moved[i], want[i])
		}
	}
}

// TestYaRNNoTruncate: HF's truncate = false keeps the correction range at
// its computed ends, d*ln(4096/(beta*2*pi))/(2*ln 10000) for beta 32 and 1
// (20.944..., 45.027...), instead of 20 and 46.
func TestYaRNNoTruncate(t *testing.T) {
	cfg := ropeYaRN4
	cfg.YaRNNoTruncate = true
	r := mustRoPE(t, cfg, 128)
	corr := func(beta float64) float64 { return 128 * math.Log(4096/(beta*2*math.Pi)) / (2 * math.Log(10000)) }
	low, high := corr(32), corr(1)
	if math.Abs(low-20.94448162063605) > 1e-12 || math.Abs(high-45.02688127375455) > 1e-12 {
		t.Fatalf("test's own correction range %v..%v is off", low, high)
	}
	lit := map[int]float64{ // from the independent script
		0: 1, 20: 0.05623413251903491, 21: 0.04861255519347015, 33: 0.005408415480185451,
		45: 0.0003862708049497823, 46: 0.000333380358040831, 63: 2.8869549617236455e-05,
	}
	inv := r.InvFreq()
	for j, f := range inv {
		base := math.Pow(10000, -float64(j)/64)
		ramp := math.Min(math.Max((float64(j)-low)/(high-low), 0), 1)
		want := base/4*ramp + base*(1-ramp)
		if math.Abs(f-want) > 1e-12*want {
			t.Errorf("pair %d: %.17g, want %.17g", j, f, want)
		}
		if l, ok := lit[j]; ok && math.Abs(f-l) > 1e-12*l {
			t.Errorf("pair %d: %.17g, want literal %.17g", j, f, l)
		}
	}
	// Pair 21 is where the two differ most visibly: truncated, the ramp
	// starts at 20 (0.047292...); untruncated at 20.94 (0.048612...).
	trunc := mustRoPE(t, ropeYaRN4, 128).InvFreq()[21]
	if math.Abs(trunc-0.047292038501684786) > 1e-15 || math.Abs(inv[21]-trunc) < 1e-3 {
		t.Errorf("pair 21: truncated %.17g, untruncated %.17g", trunc, inv[21])
	}
}

// TestYaRNMscale: DeepSeek's attention factor, get_mscale(f, mscale) /
// get_mscale(f, mscale_all_dim) with get_mscale(s, m) = 0.1*m*ln(s)+1.
func TestYaRNMscale(t *testing.T) {
	for _, tc := range []struct {
		name                 string
		factor, m, mAll, att float64
		want                 float64
	}{
		{"deepseek-v3 (equal mscales)", 40, 1, 1, 0, 1},
		{"mscale 0.707", 40, 0.707, 1, 0, (0.1*0.707*math.Log(40) + 1) / (0.1*math.Log(40) + 1)},
		{"mscale 0.707 literal", 40, 0.707, 1, 0, 0.9210423553163399},
		{"only mscale: plain default", 40, 0.707, 0, 0, 0.1*math.Log(40) + 1},
		{"attention_factor wins", 40, 0.707, 1, 1.25, 1.25},
		{"factor 1", 1, 2, 1, 0, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := format.RoPE{Style: format.RoPEInterleaved, Theta: 10000, Scaling: format.RoPEScalingYaRN,
				Factor: tc.factor, OriginalMaxPos: 4096, BetaFast: 32, BetaSlow: 1,
				Mscale: tc.m, MscaleAllDim: tc.mAll, AttentionFactor: tc.att}
			r := mustRoPE(t, cfg, 64)
			if got := float64(r.AttentionScale()); math.Abs(got-tc.want) > 1e-7 {
				t.Errorf("%s: AttentionScale %v, want %v", tc.name, got, tc.want)
			}
		})
	}
	bad := ropeYaRN4
	bad.Mscale = -1
	if _, err := NewRoPE(bad, 128); !errors.Is(err, format.ErrInvalidArgument) {
		t.Errorf("negative mscale: NewRoPE = %v, want ErrInvalidArgument", err)
	}
}
