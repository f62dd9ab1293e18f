package store

import (
	"errors"
	"fmt"

	"github.com/zeebo/blake3"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store/internal/artifact"
	"github.com/kvstore/kvstore/store/internal/spanmem"
)

// Names of the SeKV artifacts span memory uses, each bound to a model
// fingerprint (PutArtifact); spanmem.ArtifactRouterW and its siblings say
// what each holds.
const (
	ArtifactRouterW       = spanmem.ArtifactRouterW
	ArtifactRouterWPCA    = spanmem.ArtifactRouterWPCA
	ArtifactRouterBias    = spanmem.ArtifactRouterBias
	ArtifactRouterRecency = spanmem.ArtifactRouterRecency
	ArtifactTau           = spanmem.ArtifactTau
	ArtifactRank          = spanmem.ArtifactRank
	ArtifactRankGate      = spanmem.ArtifactRankGate
)

// RankGate is SeKV's rank gate g_phi: gates m = sigmoid(W2 tanh(W1 x +
// b1) + b2) of a span's features x (Features), one per component of its
// truncated SVD. Stored as ArtifactRankGate, it makes BuildSpanMemory keep
// the components whose gate exceeds 1/2 (Rank) in place of the energy
// threshold. docs/format.md draws its bytes.
type RankGate struct {
	MaxRank, Hidden int       // R (r_max) and H (hidden width)
	W1, B1, W2, B2  []float32 // [H][I], [H], [R][H], [R]; I = RankGateInputs(R)
}

func (g *RankGate) internal() *spanmem.RankGate { return (*spanmem.RankGate)(g) }

// RankGateInputs is the number of features of a rank gate of r_max r.
func RankGateInputs(r int) int { return spanmem.RankGateInputs(r) }

// Features returns the input of g for a span of rows x cols (tokens x head
// dim) whose truncated SVD has singular values s (descending) and whose
// squared Frobenius norm is total, in layer of layers, K (value false) or
// V (spanmem.RankGate.Features lists them).
func (g *RankGate) Features(s []float32, total float64, rows, cols, layer, layers int, value bool) []float64 {
	return g.internal().Features(s, total, rows, cols, layer, layers, value)
}

// Gates returns the R gates of features x.
func (g *RankGate) Gates(x []float64) []float64 { return g.internal().Gates(x) }

// Rank is the rank BuildSpanMemory keeps of such a span: the number of
// its components (at most R) whose gate exceeds 1/2.
func (g *RankGate) Rank(s []float32, total float64, rows, cols, layer, layers int, value bool) int {
	return g.internal().Rank(s, total, rows, cols, layer, layers, value)
}

// Validate checks the shape and that every weight is finite. Errors wrap
// ErrInvalidArgument.
func (g *RankGate) Validate() error { return g.internal().Validate() }

// EncodeRankGate lays g out as the data and meta of ArtifactRankGate.
// Errors wrap ErrInvalidArgument.
func EncodeRankGate(g *RankGate) ([]byte, ArtifactMeta, error) {
	return spanmem.EncodeRankGate(g.internal())
}

// DecodeRankGate parses an ArtifactRankGate. Errors wrap
// ErrInvalidArgument.
func DecodeRankGate(data []byte, meta ArtifactMeta) (*RankGate, error) {
	g, err := spanmem.DecodeRankGate(data, meta)
	return (*RankGate)(g), err
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

// dbArtifacts reads the SeKV artifacts of in's model from the catalog for
// spanmem.Build (which checks in before it asks) and for span memory's
// other calls.
type dbArtifacts struct {
	db *DB
	in *spanmem.Input
}

// Artifact reads name in one catalog read; found is false (and err nil)
// when it is absent for this model.
func (a *dbArtifacts) Artifact(name string) (l spanmem.Artifact, found bool, err error) {
	_, err = a.db.artifact(a.in.Model.Fingerprint(), name, func(body []byte, info *artifact.Info) {
		l.Data = append([]byte{}, body[len(body)-info.Size:]...)
		l.Meta = info.Meta
	})
	switch {
	case err == nil:
		l.Hash = blake3.Sum256(l.Data)
		return l, true, nil
	case errors.Is(err, ErrNotFound) || errors.Is(err, ErrModelMismatch):
		return l, false, nil
	}
	return l, false, err
}

// HeadValues reads a per-head artifact, or returns nil when it is absent.
func (a *dbArtifacts) HeadValues(name string) ([]float32, error) {
	l, ok, err := a.Artifact(name)
	if err != nil || !ok {
		return nil, err
	}
	m := a.in.Model
	v, err := DecodeHeadValues(l.Data, l.Meta, m.Layers, m.KVHeads)
	if err != nil {
		return nil, fmt.Errorf("artifact %q: %w", name, err)
	}
	return v, nil
}
