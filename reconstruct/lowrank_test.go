package reconstruct

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/kvstore/kvstore/format"
)

// lowrankRoPE is a named RoPE variant.
type lowrankRoPE struct {
	name string
	rope *RoPE
}

// lowrankRoPEs are the RoPE variants the reconstruction tests run under:
// rotate-half (first), YaRN (AttentionScale != 1) and partial interleaved.
func lowrankRoPEs(t *testing.T, headDim int) []lowrankRoPE {
	t.Helper()
	var out []lowrankRoPE
	for _, v := range []struct {
		name string
		cfg  format.RoPE
	}{
		{"rotate-half", format.RoPE{Style: format.RoPERotateHalf, Theta: 10000}},
		{"yarn", format.RoPE{Style: format.RoPERotateHalf, Theta: 10000, Scaling: format.RoPEScalingYaRN,
			Factor: 4, OriginalMaxPos: 2048, BetaFast: 32, BetaSlow: 1}},
		{"partial-interleaved", format.RoPE{Style: format.RoPEInterleaved, Theta: 10000, RotaryDims: headDim / 2}},
	} {
		r, err := NewRoPE(v.cfg, headDim)
		if err != nil {
			t.Fatalf("%s: %v", v.name, err)
		}
		out = append(out, lowrankRoPE{v.name, r})
	}
	if out[1].rope.AttentionScale() == 1 {
		t.Fatal("test data: yarn without an attention scale")
	}
	return out
}

// lowrankReference is the documented arithmetic, written element by
// element: for each row and column, acc = +0, then acc += c[i]*Vt[i][j]
// over i ascending, every operation rounded to float32.
func lowrankReference(f *Factors, gates []float32) []float32 {
	out := make([]float32, f.Rows*f.Cols)
	for t := 0; t < f.Rows; t++ {
		for j := 0; j < f.Cols; j++ {
			var acc float32
			for i := 0; i < f.Rank; i++ {
				w := f.S[i]
				if gates != nil {
					w = gates[i] * f.S[i]
				}
				c := w * f.U[t*f.Rank+i]
				acc = acc + float32(c*f.Vt[i*f.Cols+j])
			}
			out[t*f.Cols+j] = acc
		}
	}
	return out
}

func lowrankGates(rng *rand.Rand, n int) []float32 {
	g := make([]float32, n)
	for i := range g {
		g[i] = float32(rng.Float64())
	}
	g[n/2] = 0
	return g
}

func sameBits(a, b []float32) bool {
	return slices.EqualFunc(a, b, func(x, y float32) bool { return math.Float32bits(x) == math.Float32bits(y) })
}

func TestReconstructMatchesDefinition(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 7))
	// Shapes cover one chunk, several chunks with a partial last one, and
	// column counts that are and are not multiples of the SIMD width.
	for _, shape := range [][3]int{{9, 16, 6}, {150, 40, 7}, {70, 128, 32}, {3, 8, 1}} {
		rows, cols, rank := shape[0], shape[1], shape[2]
		f := factorsTest(rng, rows, cols, rank)
		for _, gates := range [][]float32{nil, lowrankGates(rng, rank)} {
			dst := make([]float32, rows*cols)
			if err := ReconstructInto(dst, f, gates, nil, nil); err != nil {
				t.Fatal(err)
			}
			if want := lowrankReference(f, gates); !sameBits(dst, want) {
				t.Fatalf("%v gates %v: not the documented arithmetic", shape, gates != nil)
			}
			// And it is the product, to float32 accuracy.
			for r := 0; r < rows; r++ {
				for j := 0; j < cols; j++ {
					var exact, mag float64
					for i := 0; i < rank; i++ {
						m := 1.0
						if gates != nil {
							m = float64(gates[i])
						}
						p := m * float64(f.S[i]) * float64(f.U[r*rank+i]) * float64(f.Vt[i*cols+j])
						exact += p
						mag += math.Abs(p)
					}
					if math.Abs(float64(dst[r*cols+j])-exact) > 1e-5*mag {
						t.Fatalf("%v: (%d,%d) = %v, exact %v", shape, r, j, dst[r*cols+j], exact)
					}
				}
			}
		}
	}
}

func TestReconstructRoPEInSamePass(t *testing.T) {
	const rows, hd, rank = 75, 16, 5
	rng := rand.New(rand.NewPCG(2, 7))
	f := factorsTest(rng, rows, hd, rank)
	gates := lowrankGates(rng, rank)
	pos := make([]int64, rows)
	for i := range pos {
		pos[i] = 1000 + int64(3*i)
	}
	for _, v := range lowrankRoPEs(t, hd) {
		t.Run(v.name, func(t *testing.T) {
			got := make([]float32, rows*hd)
			if err := ReconstructInto(got, f, gates, v.rope, pos); err != nil {
				t.Fatal(err)
			}
			want := make([]float32, rows*hd)
			if err := ReconstructInto(want, f, gates, nil, nil); err != nil {
				t.Fatal(err)
			}
			for r := 0; r < rows; r++ {
				v.rope.Apply(want[r*hd:(r+1)*hd], pos[r])
			}
			if !sameBits(got, want) {
				t.Errorf("%s: reconstruct with RoPE differs from reconstruct then Apply", v.name)
			}
			for _, dt := range []format.DType{format.DTypeF32, format.DTypeF16, format.DTypeBF16} {
				b := make([]byte, rows*hd*dt.Size())
				if err := ReconstructBytes(b, dt, f, gates, v.rope, pos); err != nil {
					t.Fatal(err)
				}
				wantB := make([]byte, len(b))
				_ = format.FromF32(wantB, want, dt)
				if !slices.Equal(b, wantB) {
					t.Errorf("%s %v: ReconstructBytes is not ReconstructInto rounded", v.name, dt)
				}
			}
		})
	}
}

// TestReconstructGated: folding gates into the factors and dropping the
// zero-gated components changes no bit of the result.
func TestReconstructGated(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 7))
	f := factorsTest(rng, 13, 24, 8)
	gates := lowrankGates(rng, 8)
	gates[0], gates[5] = 0, 1
	g, err := f.Gated(gates)
	if err != nil {
		t.Fatal(err)
	}
	if g.Rank != 6 {
		t.Fatalf("gated rank %d, want 6", g.Rank)
	}
	a, b := make([]float32, 13*24), make([]float32, 13*24)
	if err := ReconstructInto(a, f, gates, nil, nil); err != nil {
		t.Fatal(err)
	}
	if err := ReconstructInto(b, g, nil, nil, nil); err != nil {
		t.Fatal(err)
	}
	if !sameBits(a, b) {
		t.Error("gated factors reconstruct differently")
	}
	zero := &Factors{Rows: 3, Cols: 4}
	out := []float32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}
	if err := ReconstructInto(out, zero, nil, nil, nil); err != nil {
		t.Fatal(err)
	}
	if !sameBits(out, make([]float32, 12)) {
		t.Errorf("rank 0 gives %v, want +0s", out)
	}
}

// TestUnapplySVDReconstruct is the span memory round trip: post-RoPE keys
// whose pre-RoPE form is low rank are un-rotated, factored, and
// reconstructed at their positions.
func TestUnapplySVDReconstruct(t *testing.T) {
	const rows, hd = 48, 32
	rng := rand.New(rand.NewPCG(4, 7))
	pre := svdTestMatrix(rng, rows, hd, []float64{20, 10, 5, 2}, 0)
	pos := make([]int64, rows)
	for i := range pos {
		pos[i] = int64(500 + i)
	}
	for _, v := range lowrankRoPEs(t, hd) {
		t.Run(v.name, func(t *testing.T) {
			post := slices.Clone(pre)
			for r := 0; r < rows; r++ {
				v.rope.Apply(post[r*hd:(r+1)*hd], pos[r])
			}
			back := slices.Clone(post)
			for r := 0; r < rows; r++ {
				Unapply(v.rope, back[r*hd:(r+1)*hd], pos[r])
			}
			if rel := lowrankRelErr(back, pre); rel > 1e-6 {
				t.Errorf("%s: Unapply(Apply(x)) relative error %v", v.name, rel)
			}
			f, err := SVD(back, rows, hd, SVDOptions{Energy: 0.999999})
			if err != nil {
				t.Fatal(err)
			}
			if f.Rank != 4 {
				t.Errorf("%s: un-rotated keys have rank %d, want 4", v.name, f.Rank)
			}
			got := make([]float32, rows*hd)
			if err := ReconstructInto(got, f, nil, v.rope, pos); err != nil {
				t.Fatal(err)
			}
			if rel := lowrankRelErr(got, post); rel > 1e-5 {
				t.Errorf("%s: reconstructed keys relative error %v", v.name, rel)
			}
		})
	}
}

func lowrankRelErr(got, want []float32) float64 {
	var e, n float64
	for i := range want {
		d := float64(got[i]) - float64(want[i])
		e += d * d
		n += float64(want[i]) * float64(want[i])
	}
	return math.Sqrt(e / n)
}

func TestReconstructRejects(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 7))
	f := factorsTest(rng, 4, 8, 2)
	rope8 := lowrankRoPEs(t, 8)[0].rope // rotate-half
	rope16 := lowrankRoPEs(t, 16)[0].rope
	pos := []int64{0, 1, 2, 3}
	dst := make([]float32, 32)
	for _, tc := range []struct {
		name  string
		dst   []float32
		f     *Factors
		gates []float32
		rope  *RoPE
		pos   []int64
	}{
		{"dst", dst[:31], f, nil, nil, nil},
		{"gate count", dst, f, []float32{1}, nil, nil},
		{"negative gate", dst, f, []float32{1, -1}, nil, nil},
		{"rope head dim", dst, f, nil, rope16, pos},
		{"positions", dst, f, nil, rope8, pos[:3]},
		{"positions without rope", dst, f, nil, nil, pos},
		{"factors", dst, &Factors{Rows: 4, Cols: 8, Rank: 2, U: f.U[:7], S: f.S, Vt: f.Vt}, nil, nil, nil},
	} {
		if err := ReconstructInto(tc.dst, tc.f, tc.gates, tc.rope, tc.pos); !errors.Is(err, format.ErrInvalidArgument) {
			t.Errorf("%s: err %v, want ErrInvalidArgument", tc.name, err)
		}
	}
	if err := ReconstructBytes(make([]byte, 64), format.DTypeInt8, f, nil, nil, nil); !errors.Is(err, format.ErrInvalidArgument) {
		t.Errorf("int8: %v", err)
	}
	if err := ReconstructBytes(make([]byte, 63), format.DTypeBF16, f, nil, nil, nil); !errors.Is(err, format.ErrInvalidArgument) {
		t.Errorf("short bytes: %v", err)
	}
}
