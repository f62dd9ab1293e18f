package reconstruct

import (
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/kvstore/kvstore/format"
)

// factorsTest returns valid random factors (U, Vt entries in [-1, 1)).
func factorsTest(rng *rand.Rand, rows, cols, rank int) *Factors {
	f := &Factors{Rows: rows, Cols: cols, Rank: rank,
		U: make([]float32, rows*rank), S: make([]float32, rank), Vt: make([]float32, rank*cols)}
	for i := range f.U {
		f.U[i] = float32(rng.Float64()*2 - 1)
	}
	for i := range f.Vt {
		f.Vt[i] = float32(rng.Float64()*2 - 1)
	}
	for i := range f.S {
		f.S[i] = float32(100 / float64(i+1))
	}
	return f
}

func TestFactorsRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 5))
	for _, dt := range []format.DType{format.DTypeF32, format.DTypeF16, format.DTypeBF16} {
		for _, shape := range [][3]int{{37, 16, 5}, {1, 128, 1}, {8, 8, 0}, {64, 128, 32}} {
			f := factorsTest(rng, shape[0], shape[1], shape[2])
			prefix := []byte("xyz")
			b, err := AppendFactors(prefix, f, dt)
			if err != nil {
				t.Fatal(err)
			}
			if string(b[:3]) != "xyz" {
				t.Fatal("prefix overwritten")
			}
			b = b[3:]
			l := FactorLayout{Rows: f.Rows, Cols: f.Cols, Rank: f.Rank, DType: dt}
			if len(b) != l.Size() || l.Size() != 16+(f.Rows*f.Rank+f.Rank+f.Rank*f.Cols)*dt.Size() {
				t.Fatalf("%v %v: %d bytes, layout size %d", dt, shape, len(b), l.Size())
			}
			pl, err := ParseFactorLayout(b)
			if err != nil || pl != l {
				t.Fatalf("layout %+v, %v; want %+v", pl, err, l)
			}
			g, gdt, err := DecodeFactors(b)
			if err != nil {
				t.Fatal(err)
			}
			if gdt != dt || g.Rows != f.Rows || g.Cols != f.Cols || g.Rank != f.Rank {
				t.Fatalf("decoded %v %dx%d rank %d", gdt, g.Rows, g.Cols, g.Rank)
			}
			for _, pair := range [][2][]float32{{f.U, g.U}, {f.S, g.S}, {f.Vt, g.Vt}} {
				for i := range pair[0] {
					if !factorsClose(pair[0][i], pair[1][i], dt) {
						t.Fatalf("%v: element %d: %v decoded as %v", dt, i, pair[0][i], pair[1][i])
					}
				}
			}
			// The arrays sit at the layout's offsets.
			if f.Rank > 0 {
				want := make([]byte, dt.Size())
				_ = format.FromF32(want, f.S[:1], dt)
				if !slices.Equal(b[l.SOffset():l.SOffset()+dt.Size()], want) {
					t.Errorf("%v: S[0] not at SOffset", dt)
				}
			}
		}
	}
}

// factorsClose: exact for f32, within half an ulp of the narrow type
// otherwise.
func factorsClose(want, got float32, dt format.DType) bool {
	switch dt {
	case format.DTypeF32:
		return want == got
	case format.DTypeBF16:
		return math.Abs(float64(want-got)) <= math.Abs(float64(want))*0x1p-8
	}
	return math.Abs(float64(want-got)) <= math.Abs(float64(want))*0x1p-11+0x1p-25
}

func TestFactorsEncodeRejects(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 5))
	f := factorsTest(rng, 4, 3, 2)
	if _, err := AppendFactors(nil, f, format.DTypeInt8); !errors.Is(err, format.ErrInvalidArgument) {
		t.Errorf("int8: %v", err)
	}
	big := factorsTest(rng, 4, 3, 2)
	big.S[0] = 70000 // beyond f16
	if _, err := AppendFactors(nil, big, format.DTypeF16); !errors.Is(err, format.ErrInvalidArgument) {
		t.Errorf("f16 overflow: %v", err)
	}
	if _, err := AppendFactors(nil, big, format.DTypeBF16); err != nil {
		t.Errorf("bf16 holds 70000: %v", err)
	}
	for _, tc := range []struct {
		name string
		g    *Factors
	}{
		{"rank > min", &Factors{Rows: 2, Cols: 3, Rank: 3, U: make([]float32, 6), S: make([]float32, 3), Vt: make([]float32, 9)}},
		{"short U", &Factors{Rows: 2, Cols: 3, Rank: 1, U: make([]float32, 1), S: make([]float32, 1), Vt: make([]float32, 3)}},
		{"negative S", &Factors{Rows: 2, Cols: 3, Rank: 1, U: make([]float32, 2), S: []float32{-1}, Vt: make([]float32, 3)}},
		{"nan Vt", &Factors{Rows: 2, Cols: 3, Rank: 1, U: make([]float32, 2), S: []float32{1}, Vt: []float32{0, float32(math.NaN()), 0}}},
		{"no rows", &Factors{Rows: 0, Cols: 3}},
		{"wide", &Factors{Rows: 1, Cols: maxFactorCols + 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := AppendFactors(nil, tc.g, format.DTypeF32); !errors.Is(err, format.ErrInvalidArgument) {
				t.Errorf("%s: %v", tc.name, err)
			}
		})
	}
}

func TestFactorsDecodeCorrupt(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	good, err := AppendFactors(nil, factorsTest(rng, 5, 4, 2), format.DTypeBF16)
	if err != nil {
		t.Fatal(err)
	}
	set := func(off int, v ...byte) []byte {
		c := slices.Clone(good)
		copy(c[off:], v)
		return c
	}
	u16 := func(off int, v uint16) []byte {
		c := slices.Clone(good)
		binary.LittleEndian.PutUint16(c[off:], v)
		return c
	}
	l := FactorLayout{Rows: 5, Cols: 4, Rank: 2, DType: format.DTypeBF16}
	for _, tc := range []struct {
		name string
		b    []byte
	}{
		{"empty", nil},
		{"short", good[:10]},
		{"truncated", good[:len(good)-1]},
		{"extra", append(slices.Clone(good), 0)},
		{"magic", set(0, 'X')},
		{"rows 0", set(4, 0, 0, 0, 0)},
		{"rows huge", set(4, 0xff, 0xff, 0xff, 0xff)},
		{"cols 0", u16(8, 0)},
		{"rank > min", u16(10, 5)},
		{"dtype int8", set(12, byte(format.DTypeInt8))},
		{"dtype bad", set(12, 99)},
		{"reserved", set(14, 1)},
		{"negative S", u16(l.SOffset(), 0xbf80)}, // bf16 -1
		{"nan in U", u16(l.UOffset(), 0x7fc0)},
		{"inf in Vt", u16(l.VtOffset()+2, 0x7f80)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, _, err := DecodeFactors(tc.b); !errors.Is(err, format.ErrCorruption) {
				t.Errorf("%s: err %v, want ErrCorruption", tc.name, err)
			}
		})
	}
}

func TestFactorsTruncateGated(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 5))
	f := factorsTest(rng, 6, 5, 4)
	tr := f.Truncate(2)
	if tr.Rank != 2 || tr.Validate() != nil || !slices.Equal(tr.S, f.S[:2]) || !slices.Equal(tr.Vt, f.Vt[:10]) {
		t.Fatalf("truncate: %+v", tr)
	}
	for r := 0; r < 6; r++ {
		if !slices.Equal(tr.U[r*2:r*2+2], f.U[r*4:r*4+2]) {
			t.Fatalf("truncate: U row %d", r)
		}
	}
	if f.Truncate(9).Rank != 4 || f.Truncate(-1).Rank != 0 {
		t.Error("truncate does not clamp")
	}
	g, err := f.Gated([]float32{0.5, 0, 1, 0})
	if err != nil {
		t.Fatal(err)
	}
	if g.Rank != 2 || g.S[0] != 0.5*f.S[0] || g.S[1] != f.S[2] || !slices.Equal(g.Vt[5:], f.Vt[10:15]) || g.U[1] != f.U[2] {
		t.Errorf("gated: %+v", g)
	}
	for _, gates := range [][]float32{{1, 1, 1}, {1, -1, 1, 1}, {1, float32(math.NaN()), 1, 1}, {float32(math.Inf(1)), 1, 1, 1}} {
		if _, err := f.Gated(gates); !errors.Is(err, format.ErrInvalidArgument) {
			t.Errorf("gates %v: %v", gates, err)
		}
	}
}

// FuzzDecodeFactors: decoding never panics, and whatever decodes re-encodes
// to the same bytes.
func FuzzDecodeFactors(f *testing.F) {
	rng := rand.New(rand.NewPCG(5, 5))
	for _, dt := range []format.DType{format.DTypeF32, format.DTypeF16, format.DTypeBF16} {
		b, _ := AppendFactors(nil, factorsTest(rng, 3, 4, 2), dt)
		f.Add(b)
		f.Add(b[:len(b)-2])
	}
	zero, _ := AppendFactors(nil, &Factors{Rows: 2, Cols: 2}, format.DTypeF16)
	f.Add(zero)
	f.Fuzz(func(t *testing.T, b []byte) {
		g, dt, err := DecodeFactors(b)
		if err != nil {
			return
		}
		again, err := AppendFactors(nil, g, dt)
		if err != nil || !slices.Equal(again, b) {
			t.Fatalf("re-encode: %v, equal %v", err, slices.Equal(again, b))
		}
	})
}
