package segment

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/kvstore/kvstore/format"
)

// orthonormalRows returns k orthonormal random rows of length d (Gram-Schmidt).
func orthonormalRows(rng *rand.Rand, k, d int) [][]float64 {
	var rows [][]float64
	for len(rows) < k {
		v := make([]float64, d)
		for j := range v {
			v[j] = rng.NormFloat64()
		}
		for _, r := range rows {
			dot := dot64(r, v)
			for j := range v {
				v[j] -= dot * r[j]
			}
		}
		n := math.Sqrt(dot64(v, v))
		for j := range v {
			v[j] /= n
		}
		rows = append(rows, v)
	}
	return rows
}

func dot64(a, b []float64) float64 {
	var s float64
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}

func rowF64(w []float32, i, d int) []float64 {
	out := make([]float64, d)
	for j := range out {
		out[j] = float64(w[i*d+j])
	}
	return out
}

// plantedKeys returns n keys of dimension d lying near the span of basis
// (variances scales^2), plus a large common mean and small isotropic noise.
func plantedKeys(rng *rand.Rand, n, d int, basis [][]float64, scales []float64, noise float64) []float32 {
	keys := make([]float32, n*d)
	for i := 0; i < n; i++ {
		for j := 0; j < d; j++ {
			// A large common mean, which must not leak into W.
			keys[i*d+j] = float32(7 + noise*rng.NormFloat64())
		}
		for b, row := range basis {
			z := scales[b] * rng.NormFloat64()
			for j := 0; j < d; j++ {
				keys[i*d+j] += float32(z * row[j])
			}
		}
	}
	return keys
}

func TestFitPCARecoversPlantedSubspace(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const n, d = 2000, 24
	basis := orthonormalRows(rng, 3, d)
	keys := plantedKeys(rng, n, d, basis, []float64{6, 3, 1.5}, 0.01)
	p, err := FitPCA(keys, d, 3)
	if err != nil {
		t.Fatal(err)
	}
	if p.Dim != 3 || p.HeadDim != d || len(p.W) != 3*d {
		t.Fatalf("shape %dx%d, %d weights", p.Dim, p.HeadDim, len(p.W))
	}
	for i := 0; i < 3; i++ {
		wi := rowF64(p.W, i, d)
		for j := 0; j < 3; j++ {
			want := 0.0
			if i == j {
				want = 1
			}
			if got := dot64(wi, rowF64(p.W, j, d)); math.Abs(got-want) > 1e-5 {
				t.Errorf("row %d . row %d = %v, want %v", i, j, got, want)
			}
		}
		// Ordered by variance: row i is the planted direction i, up to sign.
		if c := math.Abs(dot64(wi, basis[i])); c < 0.999 {
			t.Errorf("row %d . planted direction %d = %v, want ~1", i, i, c)
		}
		// Sign convention: the largest-magnitude element is positive.
		best := 0
		for j := range wi {
			if math.Abs(wi[j]) > math.Abs(wi[best]) {
				best = j
			}
		}
		if wi[best] <= 0 {
			t.Errorf("row %d: largest element %v not positive", i, wi[best])
		}
	}
	again, _ := FitPCA(keys, d, 3)
	if !slices.Equal(p.W, again.W) {
		t.Error("FitPCA not deterministic")
	}
}

func TestFitPCAShapes(t *testing.T) {
	keys := []float32{1, 2, 3, 4, 5, 6, 7, 9}
	for _, tc := range []struct{ dim, want int }{{0, 4}, {2, 2}, {64, 4}} {
		t.Run(fmt.Sprintf("dim %d", tc.dim), func(t *testing.T) {
			p, err := FitPCA(keys, 4, tc.dim)
			if err != nil {
				t.Fatal(err)
			}
			if p.Dim != tc.want {
				t.Errorf("dim %d: got %d, want %d", tc.dim, p.Dim, tc.want)
			}
			if err := p.Validate(); err != nil {
				t.Error(err)
			}
			// Orthonormal even though 2 keys leave 3 directions without variance.
			for i := 0; i < p.Dim; i++ {
				if n := dot64(rowF64(p.W, i, 4), rowF64(p.W, i, 4)); math.Abs(n-1) > 1e-6 {
					t.Errorf("row %d norm^2 %v", i, n)
				}
			}
		})
	}
	for _, tc := range []struct {
		keys         []float32
		headDim, dim int
	}{
		{nil, 4, 2},
		{keys[:7], 4, 2},
		{keys, 0, 2},
		{keys, 4, -1},
		{[]float32{1, float32(math.NaN()), 3, 4}, 4, 2},
	} {
		if _, err := FitPCA(tc.keys, tc.headDim, tc.dim); !errors.Is(err, format.ErrInvalidArgument) {
			t.Errorf("FitPCA(%d keys, %d, %d): err %v", len(tc.keys), tc.headDim, tc.dim, err)
		}
	}
}

func TestProjectionProject(t *testing.T) {
	p := &Projection{Dim: 2, HeadDim: 3, W: []float32{1, 2, 3, -1, 0, 0.5}}
	got := p.Project(nil, []float32{1, 1, 2})
	if want := []float32{9, 0}; !slices.Equal(got, want) {
		t.Errorf("Project = %v, want %v", got, want)
	}
	defer func() {
		if recover() == nil {
			t.Error("no panic on a wrong-length vector")
		}
	}()
	p.Project(nil, []float32{1})
}

func TestProjectionMarshal(t *testing.T) {
	p := &Projection{Dim: 2, HeadDim: 3, W: []float32{1, 2, 3, -1, 0, 0.5}}
	b, err := p.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != 12+4*6 {
		t.Fatalf("%d bytes", len(b))
	}
	var q Projection
	if err := q.UnmarshalBinary(b); err != nil {
		t.Fatal(err)
	}
	if q.Dim != 2 || q.HeadDim != 3 || !slices.Equal(q.W, p.W) {
		t.Errorf("round trip: %+v", q)
	}
	corrupt := []struct {
		name string
		c    []byte
	}{
		{"empty", nil},
		{"magic", append([]byte("XXPJ"), b[4:]...)},
		{"truncated", b[:len(b)-1]},
		{"extra", append(slices.Clone(b), 0)},
		{"dim>head", withU32(b, 4, 4)},
		{"dim 0", withU32(b, 4, 0)},
		{"huge", withU32(withU32(b, 8, 1<<31), 4, 1<<30)},
		{"nan", withU32(b, 12, 0x7fc00000)},
	}
	for _, tc := range corrupt {
		t.Run(tc.name, func(t *testing.T) {
			q := Projection{Dim: 9}
			if err := q.UnmarshalBinary(tc.c); !errors.Is(err, format.ErrCorruption) {
				t.Errorf("%s: err %v, want ErrCorruption", tc.name, err)
			}
			if q.Dim != 9 {
				t.Errorf("%s: projection modified on error", tc.name)
			}
		})
	}
	if _, err := (&Projection{Dim: 2, HeadDim: 3, W: []float32{1}}).MarshalBinary(); !errors.Is(err, format.ErrInvalidArgument) {
		t.Errorf("marshal of a bad projection: %v", err)
	}
}

func withU32(b []byte, off int, v uint32) []byte {
	c := slices.Clone(b)
	c[off], c[off+1], c[off+2], c[off+3] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24)
	return c
}

// FuzzProjectionUnmarshal: decoding never panics, and whatever decodes
// re-encodes to the same bytes.
func FuzzProjectionUnmarshal(f *testing.F) {
	good, _ := (&Projection{Dim: 2, HeadDim: 3, W: []float32{1, 2, 3, -1, 0, 0.5}}).MarshalBinary()
	f.Add(good)
	f.Add(good[:13])
	f.Add(withU32(good, 4, 7))
	f.Add([]byte("KVPJ"))
	f.Fuzz(func(t *testing.T, b []byte) {
		var p Projection
		if err := p.UnmarshalBinary(b); err != nil {
			return
		}
		again, err := p.MarshalBinary()
		if err != nil || !slices.Equal(again, b) {
			t.Fatalf("re-encode: %v, equal %v", err, slices.Equal(again, b))
		}
	})
}
