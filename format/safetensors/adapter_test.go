package safetensors

import (
	"encoding/binary"
	"errors"
	"math"
	"testing"

	"github.com/kvstore/kvstore/format"
)

func testAdapter() *Adapter {
	a := &Adapter{Hidden: 4, Metadata: map[string]string{MetaTrainConfig: `{"lr":0.0005}`}}
	for i := range 3 * 4 {
		a.Header = append(a.Header, float32(i)*0.37-1.1)
	}
	for i := range 2 * 4 {
		a.Trailer = append(a.Trailer, float32(i)*-0.21+0.3)
	}
	return a
}

func TestAdapterRoundTrip(t *testing.T) {
	a := testAdapter()
	for _, dt := range []DType{F32, BF16} {
		f, err := EncodeAdapter(a, dt)
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
		got, err := DecodeAdapter(g)
		if err != nil {
			t.Fatal(err)
		}
		if got.Hidden != 4 || len(got.Header) != 12 || len(got.Trailer) != 8 || got.Metadata[MetaTrainConfig] != a.Metadata[MetaTrainConfig] {
			t.Fatalf("%s: hidden %d, %d header and %d trailer values, metadata %v", dt, got.Hidden, len(got.Header), len(got.Trailer), got.Metadata)
		}
		for _, p := range [][2][]float32{{a.Header, got.Header}, {a.Trailer, got.Trailer}} {
			for i, v := range p[0] {
				tol := 0.0
				if dt == BF16 {
					tol = math.Abs(float64(v)) * 0x1p-8 // half a bf16 ulp
				}
				if math.Abs(float64(p[1][i]-v)) > tol {
					t.Fatalf("%s: value %d: %v, wrote %v", dt, i, p[1][i], v)
				}
			}
		}
	}
}

// The reference's tensors may carry a leading batch dimension of 1, and an
// adapter may have no header (or no trailer) rows.
func TestDecodeAdapterShapes(t *testing.T) {
	a := testAdapter()
	a.Trailer = nil
	f, err := EncodeAdapter(a, F32)
	if err != nil {
		t.Fatal(err)
	}
	f.Tensors[0].Shape = []uint64{1, 3, 4}
	got, err := DecodeAdapter(f)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Header) != 12 || len(got.Trailer) != 0 || got.Hidden != 4 {
		t.Fatalf("%d header, %d trailer values, hidden %d", len(got.Header), len(got.Trailer), got.Hidden)
	}
}

func TestDecodeAdapterBad(t *testing.T) {
	nan := make([]byte, 4)
	binary.LittleEndian.PutUint32(nan, math.Float32bits(float32(math.NaN())))
	for _, tc := range []struct {
		name string
		edit func(f *File)
	}{
		{"no trailer", func(f *File) { f.Tensors = f.Tensors[:1] }},
		{"extra tensor", func(f *File) {
			f.Tensors = append(f.Tensors, Tensor{Name: "x", DType: F32, Shape: []uint64{1}, Data: nan})
		}},
		{"widths differ", func(f *File) { f.Tensors[1].Shape = []uint64{4, 2} }},
		{"int dtype", func(f *File) {
			f.Tensors[0].DType, f.Tensors[1].DType = I32, I32
		}},
		{"dtypes differ", func(f *File) { f.Tensors[1].DType = U32 }},
		{"rank 1", func(f *File) { f.Tensors[0].Shape = []uint64{12} }},
		{"batch of 2", func(f *File) { f.Tensors[0].Shape = []uint64{2, 3, 2} }},
		{"nan", func(f *File) { copy(f.Tensors[0].Data[8:], nan) }},
		{"short data", func(f *File) { f.Tensors[0].Data = f.Tensors[0].Data[4:] }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := EncodeAdapter(testAdapter(), F32)
			if err != nil {
				t.Fatal(err)
			}
			tc.edit(f)
			if _, err := DecodeAdapter(f); !errors.Is(err, format.ErrCorruption) {
				t.Errorf("%s: %v", tc.name, err)
			}
		})
	}
	for _, tc := range []struct {
		name string
		a    *Adapter
	}{
		{"zero hidden", &Adapter{Hidden: 0}},
		{"ragged rows", &Adapter{Hidden: 4, Header: make([]float32, 5)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := EncodeAdapter(tc.a, F32); !errors.Is(err, format.ErrInvalidArgument) {
				t.Errorf("%s: %v", tc.name, err)
			}
		})
	}
	if _, err := EncodeAdapter(testAdapter(), F16); !errors.Is(err, format.ErrInvalidArgument) {
		t.Errorf("F16 encode: %v", err)
	}
}

// FuzzDecodeAdapter: whatever decodes re-encodes and decodes to the same
// values.
func FuzzDecodeAdapter(f *testing.F) {
	for _, dt := range []DType{F32, BF16} {
		file, err := EncodeAdapter(testAdapter(), dt)
		if err != nil {
			f.Fatal(err)
		}
		b, err := Encode(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		f.Add(b[:len(b)-3])
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		file, err := Decode(b)
		if err != nil {
			return
		}
		a, err := DecodeAdapter(file)
		if err != nil {
			return
		}
		again, err := EncodeAdapter(a, F32)
		if err != nil {
			t.Fatal(err)
		}
		b2, err := DecodeAdapter(again)
		if err != nil || len(b2.Header) != len(a.Header) || len(b2.Trailer) != len(a.Trailer) {
			t.Fatalf("re-decode: %v", err)
		}
		for i := range a.Header {
			if math.Float32bits(a.Header[i]) != math.Float32bits(b2.Header[i]) {
				t.Fatalf("header value %d changed", i)
			}
		}
	})
}
