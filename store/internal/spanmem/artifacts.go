package spanmem

import (
	"fmt"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/segment"
)

// Names of the SeKV artifacts span memory uses, each bound to a model
// fingerprint (store.PutArtifact). All are little-endian f32 with the shape in
// their format.ArtifactMeta:
//
//	ArtifactRouterW     [layers][kv_heads][d'][head_dim]  trained routing projection W
//	ArtifactRouterWPCA  [layers][kv_heads][d'][head_dim]  default W, fitted by PCA (stored by store.PutSpanMemory)
//	ArtifactRouterBias  [layers][kv_heads]                router bias b (default 0)
//	ArtifactRouterRecency [layers][kv_heads]              weight rho of the routers' recency term (default 0; reconstruct.Router.Recency)
//	ArtifactTau         [layers][kv_heads]                zoom threshold tau (default reconstruct.DefaultTau)
//	ArtifactRank        [layers][kv_heads]                fixed factor rank per (layer, head); 0 = energy threshold
//
// SeKV's rank gate g_phi, a small network of a span's singular spectrum
// shared by all (layer, head)s, is ArtifactRankGate (rankgate.go draws its
// bytes; lab/rankgate trains it). A fixed ArtifactRank of a head wins over
// the gate, and the gate over the energy threshold.
const (
	ArtifactRouterW    = "sekv/router-w"
	ArtifactRouterWPCA = "sekv/router-w-pca"
	ArtifactRouterBias = "sekv/router-bias"
	// ArtifactRouterRecency is the trained routers' recency weight, the
	// one term they have beyond SeKV's formula (docs/decisions.md).
	ArtifactRouterRecency = "sekv/router-recency"
	ArtifactTau           = "sekv/tau"
	ArtifactRank          = "sekv/rank"
)

// EncodeProjections lays out one projection per (layer, KV head),
// layer-major, as the data and meta of a W artifact
// (format.EncodeProjections). All must share Dim and HeadDim. Errors wrap
// ErrInvalidArgument.
func EncodeProjections(ps []*segment.Projection, layers, kvHeads int) ([]byte, format.ArtifactMeta, error) {
	if layers < 1 || kvHeads < 1 || len(ps) != layers*kvHeads {
		return nil, format.ArtifactMeta{}, fmt.Errorf("%w: projections: %d for %d layers x %d kv heads", ErrInvalidArgument, len(ps), layers, kvHeads)
	}
	dim, hd := ps[0].Dim, ps[0].HeadDim
	ws := make([][]float32, len(ps))
	for i, p := range ps {
		if err := p.Validate(); err != nil {
			return nil, format.ArtifactMeta{}, fmt.Errorf("projection %d: %w", i, err)
		}
		if p.Dim != dim || p.HeadDim != hd {
			return nil, format.ArtifactMeta{}, fmt.Errorf("%w: projection %d is %dx%d, the first %dx%d", ErrInvalidArgument, i, p.Dim, p.HeadDim, dim, hd)
		}
		ws[i] = p.W
	}
	return format.EncodeProjections(ws, layers, kvHeads, dim, hd)
}

// DecodeProjections parses a W artifact for a model of the given shape.
// Errors wrap ErrInvalidArgument: another shape or dtype, or a non-finite
// weight.
func DecodeProjections(data []byte, meta format.ArtifactMeta, layers, kvHeads, headDim int) ([]*segment.Projection, error) {
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

// Artifact is one stored artifact as Build reads it.
type Artifact struct {
	Data []byte
	Meta format.ArtifactMeta
	Hash [32]byte // BLAKE3-256 of Data
}

// Artifacts is where Build finds a model's SeKV artifacts (the store's
// catalog, for the store). Build asks for ArtifactRouterW, then
// ArtifactRouterWPCA, then the per-head ArtifactRank, then
// ArtifactRankGate.
type Artifacts interface {
	// Artifact returns the artifact stored under name, found false (and
	// no error) when there is none.
	Artifact(name string) (a Artifact, found bool, err error)
	// HeadValues returns the per-head artifact name decoded
	// (format.DecodeHeadValues), nil when there is none.
	HeadValues(name string) ([]float32, error)
}
