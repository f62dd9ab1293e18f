package store

import (
	"fmt"

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

// encodeProjections lays out one projection per (layer, KV head),
// layer-major, as the data and meta of a W artifact
// (format.EncodeProjections). All must share Dim and HeadDim. Errors wrap
// ErrInvalidArgument.
func encodeProjections(ps []*segment.Projection, layers, kvHeads int) ([]byte, ArtifactMeta, error) {
	if layers < 1 || kvHeads < 1 || len(ps) != layers*kvHeads {
		return nil, ArtifactMeta{}, fmt.Errorf("%w: projections: %d for %d layers x %d kv heads", ErrInvalidArgument, len(ps), layers, kvHeads)
	}
	dim, hd := ps[0].Dim, ps[0].HeadDim
	ws := make([][]float32, len(ps))
	for i, p := range ps {
		if err := p.Validate(); err != nil {
			return nil, ArtifactMeta{}, fmt.Errorf("projection %d: %w", i, err)
		}
		if p.Dim != dim || p.HeadDim != hd {
			return nil, ArtifactMeta{}, fmt.Errorf("%w: projection %d is %dx%d, the first %dx%d", ErrInvalidArgument, i, p.Dim, p.HeadDim, dim, hd)
		}
		ws[i] = p.W
	}
	return format.EncodeProjections(ws, layers, kvHeads, dim, hd)
}

// decodeProjections parses a W artifact for a model of the given shape.
// Errors wrap ErrInvalidArgument: another shape or dtype, or a non-finite
// weight.
func decodeProjections(data []byte, meta ArtifactMeta, layers, kvHeads, headDim int) ([]*segment.Projection, error) {
	dim, ws, err := format.DecodeProjections(data, meta, layers, kvHeads, headDim)
	if err != nil {
		return nil, err
	}
	out := make([]*segment.Projection, len(ws))
	for g, w := range ws {
		out[g] = &segment.Projection{Dim: dim, HeadDim: headDim, W: w}
		if err := out[g].Validate(); err != nil {
			return nil, fmt.Errorf("projection artifact, group %d: %w", g, err)
		}
	}
	return out, nil
}

// EncodeHeadValues lays out one float per (layer, KV head) as the data and
// meta of a tau, bias or rank artifact (format.EncodeHeadValues).
func EncodeHeadValues(v []float32, layers, kvHeads int) ([]byte, ArtifactMeta, error) {
	return format.EncodeHeadValues(v, layers, kvHeads)
}

// DecodeHeadValues parses a tau, bias or rank artifact; every value must be
// finite. Errors wrap ErrInvalidArgument.
func DecodeHeadValues(data []byte, meta ArtifactMeta, layers, kvHeads int) ([]float32, error) {
	return format.DecodeHeadValues(data, meta, layers, kvHeads)
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
