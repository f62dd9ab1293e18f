package reconstruct

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/kvstore/kvstore/format"
)

// Reference configurations used across the tests.
var (
	ropeLlama31 = format.RoPE{Style: format.RoPERotateHalf, Theta: 500000, Scaling: format.RoPEScalingLlama3,
		Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OriginalMaxPos: 8192}
	ropeYaRN4 = format.RoPE{Style: format.RoPERotateHalf, Theta: 10000, Scaling: format.RoPEScalingYaRN,
		Factor: 4, OriginalMaxPos: 4096, BetaFast: 32, BetaSlow: 1}
	ropeStories = format.RoPE{Style: format.RoPEInterleaved, Theta: 10000}
)

func mustRoPE(t testing.TB, cfg format.RoPE, headDim int) *RoPE {
	t.Helper()
	r, err := NewRoPE(cfg, headDim)
	if err != nil {
		t.Fatalf("NewRoPE(%+v, %d): %v", cfg, headDim, err)
	}
	return r
}

func TestNewRoPERejects(t *testing.T) {
	good := format.RoPE{Style: format.RoPERotateHalf, Theta: 10000}
	for _, tc := range []struct {
		name    string
		edit    func(*format.RoPE)
		headDim int
	}{
		{"unknown style", func(c *format.RoPE) { c.Style = 9 }, 64},
		{"odd rotary dims", func(c *format.RoPE) { c.RotaryDims = 3 }, 64},
		{"rotary dims past head", func(c *format.RoPE) { c.RotaryDims = 66 }, 64},
		{"odd head dim", func(c *format.RoPE) {}, 63},
		{"zero head dim", func(c *format.RoPE) {}, 0},
		{"theta 1", func(c *format.RoPE) { c.Theta = 1 }, 64},
		{"theta NaN", func(c *format.RoPE) { c.Theta = math.NaN() }, 64},
		{"linear without factor", func(c *format.RoPE) { c.Scaling = format.RoPEScalingLinear }, 64},
		{"llama3 high <= low", func(c *format.RoPE) {
			*c = ropeLlama31
			c.HighFreqFactor = c.LowFreqFactor
		}, 128},
		{"yarn without beta", func(c *format.RoPE) {
			*c = ropeYaRN4
			c.BetaFast = 0
		}, 128},
		{"unknown scaling", func(c *format.RoPE) { c.Scaling = 7 }, 64},
	} {
		cfg := good
		tc.edit(&cfg)
		if _, err := NewRoPE(cfg, tc.headDim); !errors.Is(err, format.ErrInvalidArgument) {
			t.Errorf("%s: NewRoPE = %v, want ErrInvalidArgument", tc.name, err)
		}
	}
}

// TestInvFreq checks the inverse frequencies of every scaling against values
// computed independently (by hand, or by a float64 script of HF's formulas
// outside this code).
func TestInvFreq(t *testing.T) {
	for _, tc := range []struct {
		name    string
		cfg     format.RoPE
		headDim int
		rot     int
		want    map[int]float64 // pair -> inverse frequency
		scale   float64
	}{
		{"none", format.RoPE{Style: format.RoPEInterleaved, Theta: 10000}, 8, 8,
			map[int]float64{0: 1, 1: 0.1, 2: 0.01, 3: 0.001}, 1},
		{"partial rotary", format.RoPE{Style: format.RoPERotateHalf, Theta: 10000, RotaryDims: 4}, 10, 4,
			map[int]float64{0: 1, 1: 0.01}, 1},
		{"linear", format.RoPE{Style: format.RoPERotateHalf, Theta: 10000, Scaling: format.RoPEScalingLinear, Factor: 4}, 8, 8,
			map[int]float64{0: 0.25, 1: 0.025, 2: 0.0025, 3: 0.00025}, 1},
		// Llama 3.1: wavelength 2*pi*500000^(j/64) < 2048 keeps pairs 0..28,
		// > 8192 divides pairs 35..63 by 8, and pairs 29..34 are smoothed.
		{"llama3", ropeLlama31, 128, 128, map[int]float64{
			0:  1,
			1:  0.8146172338565447,
			28: 0.0032114459947525913, // high-frequency band: unchanged
			29: 0.002166570763503359,  // smooth 0.803621
			32: 0.0005248461609929547, // smooth 0.281283
			34: 0.00017850781276799638,
			35: 9.556212353964683e-05, // 0.0007644969883171747 / 8
			63: 3.068925988914511e-07,
		}, 1},
		// YaRN factor 4: correction range floor(20.94)=20 .. ceil(45.03)=46.
		{"yarn", ropeYaRN4, 128, 128, map[int]float64{
			0:  1,
			20: 0.056234132519034905, // below the ramp: unchanged
			21: 0.047292038501684786,
			33: 0.005412277021000408,
			45: 0.0004294025889973582,
			46: 0.000333380358040831, // 0.001333521432163324 / 4
			63: 2.8869549617236455e-05,
		}, 1.138629436111989},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := mustRoPE(t, tc.cfg, tc.headDim)
			if r.HeadDim() != tc.headDim || r.Rotary() != tc.rot || len(r.InvFreq()) != tc.rot/2 {
				t.Fatalf("HeadDim %d Rotary %d len(InvFreq) %d, want %d %d %d",
					r.HeadDim(), r.Rotary(), len(r.InvFreq()), tc.headDim, tc.rot, tc.rot/2)
			}
			inv := r.InvFreq()
			for j, want := range tc.want {
				if math.Abs(inv[j]-want) > 1e-12*want {
					t.Errorf("pair %d: inv freq %.17g, want %.17g", j, inv[j], want)
				}
			}
			if got := float64(r.AttentionScale()); math.Abs(got-tc.scale) > 1e-7 {
				t.Errorf("AttentionScale %v, want %v", got, tc.scale)
			}
		})
	}
}

func TestYaRNAttentionFactorOverride(t *testing.T) {
	cfg := ropeYaRN4
	cfg.AttentionFactor = 1.5
	if got := mustRoPE(t, cfg, 128).AttentionScale(); got != 1.5 {
		t.Errorf("AttentionScale with attention_factor 1.5 = %v", got)
	}
}

// TestRotateByHand checks both pairings on a 4-dim head, theta 10000
// (inverse frequencies 1 and 0.01), at position 1.
func TestRotateByHand(t *testing.T) {
	c1, s1 := float32(math.Cos(1)), float32(math.Sin(1))
	c2, s2 := float32(math.Cos(0.01)), float32(math.Sin(0.01))
	for _, tc := range []struct {
		style format.RoPEStyle
		x     []float32
		want  []float32
	}{
		// interleaved pairs (0,1), (2,3)
		{format.RoPEInterleaved, []float32{1, 0, 0, 1}, []float32{c1, s1, -s2, c2}},
		// rotate-half pairs (0,2), (1,3)
		{format.RoPERotateHalf, []float32{1, 0, 0, 1}, []float32{c1, -s2, s1, c2}},
	} {
		t.Run(tc.style.String(), func(t *testing.T) {
			r := mustRoPE(t, format.RoPE{Style: tc.style, Theta: 10000}, 4)
			x := append([]float32(nil), tc.x...)
			r.Rotate(x, 1)
			for i := range x {
				if x[i] != tc.want[i] {
					t.Errorf("%v: Rotate = %v, want %v", tc.style, x, tc.want)
					break
				}
			}
		})
	}
}

// ropeRef rotates x by pos in float64 from the definition, independently of
// RoPE's pairing code.
func ropeRef(r *RoPE, x []float32, pos int64) []float64 {
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = float64(v)
	}
	inv := r.InvFreq()
	for j, f := range inv {
		a, b := j, j+len(inv)
		if r.Config().Style == format.RoPEInterleaved {
			a, b = 2*j, 2*j+1
		}
		ang := float64(pos) * f
		xa, xb := float64(x[a]), float64(x[b])
		out[a] = xa*math.Cos(ang) - xb*math.Sin(ang)
		out[b] = xb*math.Cos(ang) + xa*math.Sin(ang)
	}
	return out
}

func ropeRandVec(rng *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	return x
}

func TestRotateMatchesDefinition(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	partial := format.RoPE{Style: format.RoPERotateHalf, Theta: 10000, RotaryDims: 32}
	for _, tc := range []struct {
		name    string
		cfg     format.RoPE
		headDim int
	}{
		{"stories", ropeStories, 8},
		{"llama3.1", ropeLlama31, 128},
		{"yarn", ropeYaRN4, 128},
		{"partial", partial, 80},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := mustRoPE(t, tc.cfg, tc.headDim)
			for _, pos := range []int64{0, 1, 7, 1000, -333, 131071} {
				x := ropeRandVec(rng, tc.headDim)
				want := ropeRef(r, x, pos)
				got := append([]float32(nil), x...)
				r.Rotate(got, pos)
				for i := range got {
					// rounding of cos, sin, two products and a sum: a few 2^-24
					// of the magnitudes involved (|x| < 6 here)
					if math.Abs(float64(got[i])-want[i]) > 4e-6 {
						t.Fatalf("%s pos %d dim %d: %v, want %v", tc.name, pos, i, got[i], want[i])
					}
				}
				for i := r.Rotary(); i < tc.headDim; i++ {
					if got[i] != x[i] {
						t.Fatalf("%s: pass-through dim %d changed", tc.name, i)
					}
				}
			}
		})
	}
}

// TestApplyScales checks that Apply is Rotate with the rotated dims scaled by
// AttentionScale, and Rotate itself when the scale is 1.
func TestApplyScales(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	cfg := ropeYaRN4
	cfg.RotaryDims = 96
	r := mustRoPE(t, cfg, 128)
	x := ropeRandVec(rng, 128)
	rot, app := append([]float32(nil), x...), append([]float32(nil), x...)
	r.Rotate(rot, 77)
	r.Apply(app, 77)
	m := r.AttentionScale()
	for i := range x {
		want := rot[i]
		if i < r.Rotary() {
			want *= m
		}
		if math.Abs(float64(app[i]-want)) > 1e-5 {
			t.Fatalf("dim %d: Apply %v, want %v", i, app[i], want)
		}
	}
	plain := mustRoPE(t, ropeLlama31, 128)
	a, b := append([]float32(nil), x...), append([]float32(nil), x...)
	plain.Rotate(a, 5000)
	plain.Apply(b, 5000)
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("scale 1: Apply differs from Rotate at dim %d", i)
		}
	}
}

// TestRotateRelative checks the property KV Packet relies on: the score of a
// query at p and a key at p+d depends on d only.
func TestRotateRelative(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	r := mustRoPE(t, ropeLlama31, 128)
	q, k := ropeRandVec(rng, 128), ropeRandVec(rng, 128)
	score := func(p, d int64) float64 {
		qq, kk := append([]float32(nil), q...), append([]float32(nil), k...)
		r.Rotate(qq, p)
		r.Rotate(kk, p+d)
		var s float64
		for i := range qq {
			s += float64(qq[i]) * float64(kk[i])
		}
		return s
	}
	for _, d := range []int64{-20, 0, 3, 500} {
		base := score(0, d)
		for _, p := range []int64{1, 999, 40000} {
			if got := score(p, d); math.Abs(got-base) > 1e-4 {
				t.Errorf("d %d: score at p %d = %v, at 0 = %v", d, p, got, base)
			}
		}
	}
}

func TestRotatePanicsOnLength(t *testing.T) {
	r := mustRoPE(t, ropeStories, 8)
	defer func() {
		if recover() == nil {
			t.Error("Rotate of a 7-dim vector did not panic")
		}
	}()
	r.Rotate(make([]float32, 7), 1)
}

// TestRotateBy checks that rotating by a table AppendCosSin made is Rotate
// or Apply at that position, bit for bit, and that bad lengths panic.
func TestRotateBy(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	partial := ropeYaRN4
	partial.RotaryDims = 96
	for _, tc := range []struct {
		name    string
		cfg     format.RoPE
		headDim int
	}{
		{"stories", ropeStories, 8},
		{"llama3.1", ropeLlama31, 128},
		{"yarn partial", partial, 128},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := mustRoPE(t, tc.cfg, tc.headDim)
			for _, pos := range []int64{0, 3, 4095, -17} {
				for _, apply := range []bool{false, true} {
					x := ropeRandVec(rng, tc.headDim)
					want, got := append([]float32(nil), x...), append([]float32(nil), x...)
					if apply {
						r.Apply(want, pos)
					} else {
						r.Rotate(want, pos)
					}
					r.RotateBy(got, r.AppendCosSin(nil, pos, apply))
					for i := range got {
						if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
							t.Fatalf("%s pos %d apply %v dim %d: %v, want %v", tc.name, pos, apply, i, got[i], want[i])
						}
					}
				}
			}
		})
	}
	r := mustRoPE(t, ropeLlama31, 128)
	for _, c := range []struct{ x, cs int }{{127, 128}, {128, 127}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("RotateBy of %d dims with a table of %d did not panic", c.x, c.cs)
				}
			}()
			r.RotateBy(make([]float32, c.x), make([]float32, c.cs))
		}()
	}
}
