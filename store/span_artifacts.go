package store

import (
	"fmt"

	"github.com/zeebo/blake3"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store/internal/spanmem"
)

// Names of the SeKV artifacts span memory uses, each bound to a model
// fingerprint (PutArtifact); spanmem.ArtifactRouterW and its siblings say
// what each holds.
const (
	ArtifactRouterW    = spanmem.ArtifactRouterW
	ArtifactRouterWPCA = spanmem.ArtifactRouterWPCA
	ArtifactRouterBias = spanmem.ArtifactRouterBias
	ArtifactTau        = spanmem.ArtifactTau
	ArtifactRank       = spanmem.ArtifactRank
)

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
