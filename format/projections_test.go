package format

import (
	"errors"
	"math"
	"slices"
	"testing"
)

func TestProjectionsRoundTrip(t *testing.T) {
	ws := [][]float32{{1, 2, 3, 4}, {-1, 0, 0.5, 8}}
	data, meta, err := EncodeProjections(ws, 1, 2, 1, 4)
	if err != nil || len(data) != 32 || !slices.Equal(meta.Shape, []int{1, 2, 1, 4}) || meta.DType != DTypeF32 {
		t.Fatalf("%d bytes, meta %+v, %v", len(data), meta, err)
	}
	if err := meta.Check(len(data)); err != nil {
		t.Fatalf("meta does not describe the data: %v", err)
	}
	dim, got, err := DecodeProjections(data, meta, 1, 2, 4)
	if err != nil || dim != 1 || !slices.EqualFunc(got, ws, slices.Equal) {
		t.Fatalf("decoded d'=%d %v, %v", dim, got, err)
	}
	for _, tc := range []struct {
		name string
		c    func() error
	}{
		{"other model", func() error { _, _, err := DecodeProjections(data, meta, 2, 2, 4); return err }},
		{"dtype", func() error {
			m := meta
			m.DType = DTypeF16
			_, _, err := DecodeProjections(data, m, 1, 2, 4)
			return err
		}},
		{"short", func() error { _, _, err := DecodeProjections(data[:31], meta, 1, 2, 4); return err }},
		{"ragged", func() error { _, _, err := EncodeProjections([][]float32{{1}, {1, 2}}, 1, 2, 1, 1); return err }},
		{"wrong count", func() error { _, _, err := EncodeProjections(ws, 2, 2, 1, 4); return err }},
		{"dim > head", func() error { _, _, err := EncodeProjections(ws, 1, 2, 5, 4); return err }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.c(); !errors.Is(err, ErrInvalidArgument) {
				t.Errorf("%s: %v, want ErrInvalidArgument", tc.name, err)
			}
		})
	}
}

func TestHeadValuesRoundTrip(t *testing.T) {
	v := []float32{0.5, 1, 2, 4, 8, 16}
	data, meta, err := EncodeHeadValues(v, 3, 2)
	if err != nil || len(data) != 24 || !slices.Equal(meta.Shape, []int{3, 2}) {
		t.Fatalf("%d bytes, meta %+v, %v", len(data), meta, err)
	}
	got, err := DecodeHeadValues(data, meta, 3, 2)
	if err != nil || !slices.Equal(got, v) {
		t.Fatalf("decoded %v, %v", got, err)
	}
	nan, _, _ := EncodeHeadValues([]float32{float32(math.NaN())}, 1, 1)
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"nan", func() error {
			_, err := DecodeHeadValues(nan, ArtifactMeta{DType: DTypeF32, Shape: []int{1, 1}}, 1, 1)
			return err
		}()},
		{"shape", func() error { _, err := DecodeHeadValues(data, meta, 2, 3); return err }()},
		{"count", func() error { _, _, err := EncodeHeadValues(v, 2, 2); return err }()},
		{"no layers", func() error { _, _, err := EncodeHeadValues(nil, 0, 1); return err }()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !errors.Is(tc.err, ErrInvalidArgument) {
				t.Errorf("%s: %v, want ErrInvalidArgument", tc.name, tc.err)
			}
		})
	}
}
