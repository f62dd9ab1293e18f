package format

import (
	"encoding/binary"
	"fmt"
	"math"
)

// The data of SeKV's artifacts (inside a "KVAR" body, artifact.go) is
// little-endian f32 with the shape in the artifact's meta:
//
//	projections (router W)   [layers][kv_heads][d'][head_dim]   shape {layers, kv_heads, d', head_dim}
//	head values (tau, bias,  [layers][kv_heads]                 shape {layers, kv_heads}
//	             rank gate)
//
//	+----------------+----------------+-----+-------------------------------------+
//	| (0, 0): n f32  | (0, 1): n f32  | ... | (layers-1, kv_heads-1): n f32       |
//	+----------------+----------------+-----+-------------------------------------+
//	n = d' * head_dim for projections (row-major d' x head_dim), 1 for head values

// EncodeProjections lays out one projection matrix (dim x headDim floats,
// row-major) per (layer, KV head), layer-major, as the data and meta of a W
// artifact. Errors wrap ErrInvalidArgument.
func EncodeProjections(ws [][]float32, layers, kvHeads, dim, headDim int) ([]byte, ArtifactMeta, error) {
	if layers < 1 || kvHeads < 1 || len(ws) != layers*kvHeads || dim < 1 || headDim < 1 || dim > headDim {
		return nil, ArtifactMeta{}, fmt.Errorf("%w: projections: %d of %dx%d for %d layers x %d kv heads",
			ErrInvalidArgument, len(ws), dim, headDim, layers, kvHeads)
	}
	data := make([]byte, 0, 4*len(ws)*dim*headDim)
	for i, w := range ws {
		if len(w) != dim*headDim {
			return nil, ArtifactMeta{}, fmt.Errorf("%w: projection %d has %d floats, want %dx%d", ErrInvalidArgument, i, len(w), dim, headDim)
		}
		data = appendF32s(data, w)
	}
	return data, ArtifactMeta{DType: DTypeF32, Shape: []int{layers, kvHeads, dim, headDim}}, nil
}

// DecodeProjections parses a W artifact for a model of the given shape and
// returns d' and one dim x headDim matrix per (layer, KV head), all
// aliasing one array. Errors wrap ErrInvalidArgument: another shape or
// dtype. Finiteness is the projection's own check.
func DecodeProjections(data []byte, meta ArtifactMeta, layers, kvHeads, headDim int) (int, [][]float32, error) {
	s := meta.Shape
	if layers < 1 || kvHeads < 1 || meta.DType != DTypeF32 || len(s) != 4 || s[0] != layers || s[1] != kvHeads || s[3] != headDim ||
		s[2] < 1 || s[2] > headDim || len(data) != 4*layers*kvHeads*s[2]*headDim {
		return 0, nil, fmt.Errorf("%w: projection artifact of %v %v (%d bytes) for %d layers x %d kv heads x head dim %d",
			ErrInvalidArgument, meta.DType, s, len(data), layers, kvHeads, headDim)
	}
	f := f32s(data)
	n := s[2] * headDim
	out := make([][]float32, layers*kvHeads)
	for g := range out {
		out[g] = f[g*n : (g+1)*n : (g+1)*n]
	}
	return s[2], out, nil
}

// EncodeHeadValues lays out one float per (layer, KV head) as the data and
// meta of a tau, bias or rank artifact.
func EncodeHeadValues(v []float32, layers, kvHeads int) ([]byte, ArtifactMeta, error) {
	if layers < 1 || kvHeads < 1 || len(v) != layers*kvHeads {
		return nil, ArtifactMeta{}, fmt.Errorf("%w: %d values for %d layers x %d kv heads", ErrInvalidArgument, len(v), layers, kvHeads)
	}
	return appendF32s(make([]byte, 0, 4*len(v)), v), ArtifactMeta{DType: DTypeF32, Shape: []int{layers, kvHeads}}, nil
}

// DecodeHeadValues parses a tau, bias or rank artifact; every value must be
// finite. Errors wrap ErrInvalidArgument.
func DecodeHeadValues(data []byte, meta ArtifactMeta, layers, kvHeads int) ([]float32, error) {
	s := meta.Shape
	if layers < 1 || kvHeads < 1 || meta.DType != DTypeF32 || len(s) != 2 || s[0] != layers || s[1] != kvHeads || len(data) != 4*layers*kvHeads {
		return nil, fmt.Errorf("%w: per-head artifact of %v %v (%d bytes) for %d layers x %d kv heads",
			ErrInvalidArgument, meta.DType, s, len(data), layers, kvHeads)
	}
	v := f32s(data)
	for i, x := range v {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return nil, fmt.Errorf("%w: per-head artifact: value %d is %v", ErrInvalidArgument, i, x)
		}
	}
	return v, nil
}

func appendF32s(dst []byte, v []float32) []byte {
	for _, x := range v {
		dst = binary.LittleEndian.AppendUint32(dst, math.Float32bits(x))
	}
	return dst
}

// f32s decodes little-endian f32s (a trailing partial element is ignored).
func f32s(b []byte) []float32 {
	out := make([]float32, len(b)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}
