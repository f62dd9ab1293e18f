package format

import (
	"errors"
	"math"
	"slices"
	"testing"
)

func testFactors() *Factors {
	return &Factors{Rows: 3, Cols: 2, Rank: 2, U: []float32{1, 0, 0, 1, 0.5, -0.5}, S: []float32{3, 1}, Vt: []float32{1, 0, 0, 1}}
}

func TestFactorsRoundTrip(t *testing.T) {
	for _, dt := range []DType{DTypeF32, DTypeF16, DTypeBF16} {
		f := testFactors()
		b, err := AppendFactors([]byte{9}, f, dt)
		if err != nil {
			t.Fatal(err)
		}
		l := FactorLayout{Rows: 3, Cols: 2, Rank: 2, DType: dt}
		if len(b) != 1+l.Size() || string(b[1:5]) != "KVSF" || l.UOffset() != FactorHeaderSize {
			t.Fatalf("%v: %d bytes, want %d", dt, len(b)-1, l.Size())
		}
		got, gotDT, err := DecodeFactors(b[1:])
		if err != nil || gotDT != dt || !slices.Equal(got.U, f.U) || !slices.Equal(got.S, f.S) || !slices.Equal(got.Vt, f.Vt) {
			t.Fatalf("%v: decoded %+v (%v), %v", dt, got, gotDT, err) // these values are exact in every dtype
		}
		if pl, err := ParseFactorLayout(b[1:]); err != nil || pl != l {
			t.Fatalf("%v: layout %+v, %v", dt, pl, err)
		}
	}
}

func TestFactorsRefusals(t *testing.T) {
	big := testFactors()
	big.S[0] = 1e6
	if _, err := AppendFactors(nil, big, DTypeF16); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("f16 overflow: %v", err)
	}
	bad := testFactors()
	bad.U[0] = float32(math.Inf(1))
	if _, err := AppendFactors(nil, bad, DTypeF32); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("infinite element: %v", err)
	}
	if _, err := AppendFactors(nil, testFactors(), DTypeU8); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("integer dtype: %v", err)
	}
	good, _ := AppendFactors(nil, testFactors(), DTypeF32)
	for _, tc := range []struct {
		name string
		edit func([]byte) []byte
	}{
		{"magic", func(b []byte) []byte { b[0] = 'X'; return b }},
		{"reserved", func(b []byte) []byte { b[14] = 1; return b }},
		{"rank", func(b []byte) []byte { b[10] = 3; return b }},
		{"short", func(b []byte) []byte { return b[:len(b)-1] }},
		{"negative S", func(b []byte) []byte {
			s := FactorLayout{Rows: 3, Cols: 2, Rank: 2, DType: DTypeF32}.SOffset()
			b[s+3] |= 0x80
			return b
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, _, err := DecodeFactors(tc.edit(slices.Clone(good))); !errors.Is(err, ErrCorruption) {
				t.Errorf("%s: %v, want ErrCorruption", tc.name, err)
			}
		})
	}
}
