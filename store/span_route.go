package store

import (
	"fmt"

	"github.com/kvstore/kvstore/segment"
	"github.com/kvstore/kvstore/store/internal/spanmem"
)

// Routing is the zoom-in policy of one span memory, what stays on the GPU
// beside the resident rows: per (layer, KV head) group (layer-major) a
// reconstruct.Router over the projected summary keys, and the threshold
// tau (store/internal/spanmem builds it and documents its fields).
type Routing = spanmem.Routing

// Routing loads the memory's routing state: every head's summaries and the
// model's artifacts. W is ArtifactRouterW when stored (a trained router),
// else the artifact the memory was built with; tau comes from ArtifactTau
// (default reconstruct.DefaultTau) and the bias from ArtifactRouterBias
// (default 0). An untrained PCA W scores with Scale 1/sqrt(HeadDim), a
// trained one with SeKV's plain sigmoid(W q . s + b). It is
// ErrInvalidArgument for a memory without a projection and ErrNotFound when
// its W artifact is gone and no trained one exists.
func (r *SpanReader) Routing() (*Routing, error) {
	m := r.meta
	if m.ProjDim == 0 {
		return nil, fmt.Errorf("%w: span memory %q has no routing projection", ErrInvalidArgument, r.name)
	}
	projs, name, same, err := r.routingProjection()
	if err != nil {
		return nil, err
	}
	tau, err := r.db.headValues(m.Model, ArtifactTau, m.Layers, m.KVHeads)
	if err != nil {
		return nil, err
	}
	bias, err := r.db.headValues(m.Model, ArtifactRouterBias, m.Layers, m.KVHeads)
	if err != nil {
		return nil, err
	}
	return spanmem.NewRouting(m, projs, name, same, tau, bias, r.Head)
}

// routingProjection loads W: the trained one when stored, else the
// memory's. same reports that it is the W the memory's keys were
// projected with.
func (r *SpanReader) routingProjection() (projs []*segment.Projection, name string, same bool, err error) {
	m := r.meta
	for _, name := range []string{ArtifactRouterW, m.Projection} {
		a, ok, err := r.db.loadArtifact(m.Model, name)
		if err != nil {
			return nil, "", false, err
		}
		if !ok {
			continue
		}
		projs, err := spanmem.DecodeProjections(a.data, a.meta, m.Layers, m.KVHeads, m.HeadDim)
		if err != nil {
			return nil, "", false, fmt.Errorf("artifact %q: %w", name, err)
		}
		return projs, name, name == m.Projection && a.hash == m.ProjectionHash, nil
	}
	return nil, "", false, fmt.Errorf("%w: span memory %q: routing projection %q of model %s", ErrNotFound, r.name, m.Projection, m.Model.Short())
}
