package store

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/zeebo/blake3"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/segment"
)

// Names of the SeKV artifacts span memory uses, each bound to a model
// fingerprint (PutArtifact). All are little-endian f32 with the shape in
// their ArtifactMeta:
//
//	ArtifactRouterW     [layers][kv_heads][d'][head_dim]  trained routing projection W
//	ArtifactRouterWPCA  [layers][kv_heads][d'][head_dim]  default W, fitted by PCA (stored by PutSpanMemory)
//	ArtifactRouterBias  [layers][kv_heads]                router bias b (default 0)
//	ArtifactTau         [layers][kv_heads]                zoom threshold tau (default reconstruct.DefaultTau)
//	ArtifactRank        [layers][kv_heads]                rank gate: fixed factor rank per (layer, head); 0 = energy threshold
//
// SeKV's rank gate is a small network of the singular-value spectrum; its
// training is the framework's job, and what kvstore keeps is its per
// (layer, head) decision.
const (
	ArtifactRouterW    = "sekv/router-w"
	ArtifactRouterWPCA = "sekv/router-w-pca"
	ArtifactRouterBias = "sekv/router-bias"
	ArtifactTau        = "sekv/tau"
	ArtifactRank       = "sekv/rank"
)

// EncodeProjections lays out one projection per (layer, KV head),
// layer-major, as the data and meta of a W artifact. All must share Dim and
// HeadDim. Errors wrap ErrInvalidArgument.
func EncodeProjections(ps []*segment.Projection, layers, kvHeads int) ([]byte, ArtifactMeta, error) {
	if layers < 1 || kvHeads < 1 || len(ps) != layers*kvHeads {
		return nil, ArtifactMeta{}, fmt.Errorf("%w: projections: %d for %d layers x %d kv heads", ErrInvalidArgument, len(ps), layers, kvHeads)
	}
	dim, hd := ps[0].Dim, ps[0].HeadDim
	data := make([]byte, 0, 4*len(ps)*dim*hd)
	for i, p := range ps {
		if err := p.Validate(); err != nil {
			return nil, ArtifactMeta{}, fmt.Errorf("projection %d: %w", i, err)
		}
		if p.Dim != dim || p.HeadDim != hd {
			return nil, ArtifactMeta{}, fmt.Errorf("%w: projection %d is %dx%d, the first %dx%d", ErrInvalidArgument, i, p.Dim, p.HeadDim, dim, hd)
		}
		for _, w := range p.W {
			data = binary.LittleEndian.AppendUint32(data, math.Float32bits(w))
		}
	}
	return data, ArtifactMeta{DType: format.DTypeF32, Shape: []int{layers, kvHeads, dim, hd}}, nil
}

// DecodeProjections parses a W artifact for a model of the given shape.
// Errors wrap ErrInvalidArgument: another shape or dtype, or a non-finite
// weight.
func DecodeProjections(data []byte, meta ArtifactMeta, layers, kvHeads, headDim int) ([]*segment.Projection, error) {
	s := meta.Shape
	if meta.DType != format.DTypeF32 || len(s) != 4 || s[0] != layers || s[1] != kvHeads || s[3] != headDim ||
		s[2] < 1 || s[2] > headDim || len(data) != 4*layers*kvHeads*s[2]*headDim {
		return nil, fmt.Errorf("%w: projection artifact of %v %v (%d bytes) for %d layers x %d kv heads x head dim %d",
			ErrInvalidArgument, meta.DType, s, len(data), layers, kvHeads, headDim)
	}
	f := f32s(data)
	n := s[2] * headDim
	out := make([]*segment.Projection, layers*kvHeads)
	for g := range out {
		out[g] = &segment.Projection{Dim: s[2], HeadDim: headDim, W: f[g*n : (g+1)*n : (g+1)*n]}
		if err := out[g].Validate(); err != nil {
			return nil, fmt.Errorf("projection artifact, group %d: %w", g, err)
		}
	}
	return out, nil
}

// EncodeHeadValues lays out one float per (layer, KV head) as the data and
// meta of a tau, bias or rank artifact.
func EncodeHeadValues(v []float32, layers, kvHeads int) ([]byte, ArtifactMeta, error) {
	if layers < 1 || kvHeads < 1 || len(v) != layers*kvHeads {
		return nil, ArtifactMeta{}, fmt.Errorf("%w: %d values for %d layers x %d kv heads", ErrInvalidArgument, len(v), layers, kvHeads)
	}
	data := make([]byte, 0, 4*len(v))
	for _, x := range v {
		data = binary.LittleEndian.AppendUint32(data, math.Float32bits(x))
	}
	return data, ArtifactMeta{DType: format.DTypeF32, Shape: []int{layers, kvHeads}}, nil
}

// DecodeHeadValues parses a tau, bias or rank artifact; every value must be
// finite. Errors wrap ErrInvalidArgument.
func DecodeHeadValues(data []byte, meta ArtifactMeta, layers, kvHeads int) ([]float32, error) {
	s := meta.Shape
	if meta.DType != format.DTypeF32 || len(s) != 2 || s[0] != layers || s[1] != kvHeads || len(data) != 4*layers*kvHeads {
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

func f32s(b []byte) []float32 {
	out := make([]float32, len(b)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out
}

// loadedArtifact is an artifact's data and meta, read in one catalog read.
type loadedArtifact struct {
	data []byte
	meta ArtifactMeta
	hash [32]byte
}

// loadArtifact reads (model, name); found is false (and err nil) when it is
// absent for this model.
func (db *DB) loadArtifact(model format.Fingerprint, name string) (a loadedArtifact, found bool, err error) {
	_, err = db.artifact(model, name, func(body []byte, info *ArtifactInfo) {
		a.data = append([]byte{}, body[len(body)-info.Size:]...)
		a.meta = info.Meta
	})
	switch {
	case err == nil:
		a.hash = blake3.Sum256(a.data)
		return a, true, nil
	case isAbsent(err):
		return a, false, nil
	}
	return a, false, err
}

// headValues reads a per-head artifact, or returns nil when it is absent.
func (db *DB) headValues(model format.Fingerprint, name string, layers, kvHeads int) ([]float32, error) {
	a, ok, err := db.loadArtifact(model, name)
	if err != nil || !ok {
		return nil, err
	}
	v, err := DecodeHeadValues(a.data, a.meta, layers, kvHeads)
	if err != nil {
		return nil, fmt.Errorf("artifact %q: %w", name, err)
	}
	return v, nil
}
