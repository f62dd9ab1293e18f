package router

import (
	"errors"
	"fmt"
	"math"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/reconstruct"
	"github.com/kvstore/kvstore/store"
)

// ErrInvalidArgument marks bad input: mismatched shapes, non-finite values.
var ErrInvalidArgument = errors.New("router: invalid argument")

// Params are the routers of a model, one per (layer, KV head) group,
// layer-major (group = layer*KVHeads + head).
type Params struct {
	Layers, KVHeads, Dim, HeadDim int
	// W holds per group the projection, Dim x HeadDim row-major.
	W [][]float64
	// Bias and Tau are per group.
	Bias, Tau []float64
	// Recency is per group rho, the weight of the recency term
	// rho * reconstruct.Recency(pos, end_s) added to a span's logit: 0
	// untrained, where the routers are SeKV's; trained only with
	// Options.Recency.
	Recency []float64
}

// Groups is Layers*KVHeads.
func (p *Params) Groups() int { return p.Layers * p.KVHeads }

// New returns routers starting from the untrained ones: W the given
// projections (one per group, Dim x HeadDim, e.g. the memory's PCA W)
// times HeadDim^-1/4, so that the trained formula's unscaled (W q).(W k)
// equals the untrained router's (W q).(W k)/sqrt(HeadDim); bias 0; tau
// reconstruct.DefaultTau; recency 0.
func New(layers, kvHeads, dim, headDim int, w [][]float32) (*Params, error) {
	p := &Params{Layers: layers, KVHeads: kvHeads, Dim: dim, HeadDim: headDim}
	if layers < 1 || kvHeads < 1 || dim < 1 || headDim < dim || len(w) != p.Groups() {
		return nil, fmt.Errorf("%w: %d layers x %d kv heads, dim %d of %d, %d projections", ErrInvalidArgument, layers, kvHeads, dim, headDim, len(w))
	}
	s := math.Pow(float64(headDim), -0.25)
	for g, wg := range w {
		if len(wg) != dim*headDim {
			return nil, fmt.Errorf("%w: projection %d has %d weights for %dx%d", ErrInvalidArgument, g, len(wg), dim, headDim)
		}
		row := make([]float64, len(wg))
		for i, v := range wg {
			row[i] = s * float64(v)
		}
		p.W = append(p.W, row)
		p.Bias = append(p.Bias, 0)
		p.Tau = append(p.Tau, reconstruct.DefaultTau)
		p.Recency = append(p.Recency, 0)
	}
	return p, nil
}

// Clone is a deep copy.
func (p *Params) Clone() *Params {
	c := *p
	c.W = make([][]float64, len(p.W))
	for g, w := range p.W {
		c.W[g] = append([]float64(nil), w...)
	}
	c.Bias, c.Tau, c.Recency = append([]float64(nil), p.Bias...), append([]float64(nil), p.Tau...), append([]float64(nil), p.Recency...)
	return &c
}

// check validates the shape and that every value is finite.
func (p *Params) check() error {
	g := p.Groups()
	if p.Layers < 1 || p.KVHeads < 1 || p.Dim < 1 || p.HeadDim < p.Dim || len(p.W) != g || len(p.Bias) != g || len(p.Tau) != g || len(p.Recency) != g {
		return fmt.Errorf("%w: routers of %d x %d groups, dim %d of %d: %d W, %d bias, %d tau, %d recency", ErrInvalidArgument,
			p.Layers, p.KVHeads, p.Dim, p.HeadDim, len(p.W), len(p.Bias), len(p.Tau), len(p.Recency))
	}
	for i, w := range p.W {
		if len(w) != p.Dim*p.HeadDim || !finite(w) {
			return fmt.Errorf("%w: W of group %d: %d weights for %dx%d, or not finite", ErrInvalidArgument, i, len(w), p.Dim, p.HeadDim)
		}
	}
	if !finite(p.Bias) || !finite(p.Tau) || !finite(p.Recency) {
		return fmt.Errorf("%w: non-finite bias, tau or recency", ErrInvalidArgument)
	}
	return nil
}

func finite(x []float64) bool {
	for _, v := range x {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return false
		}
	}
	return true
}

// Artifact is one stored artifact: its name, data and meta.
type Artifact struct {
	Name string
	Data []byte
	Meta store.ArtifactMeta
}

// Artifacts encodes p as the store's router artifacts: store.ArtifactRouterW,
// store.ArtifactRouterBias, store.ArtifactTau and
// store.ArtifactRouterRecency (f32, layer-major), the form spanmem.Routing
// reads.
func (p *Params) Artifacts() ([]Artifact, error) {
	if err := p.check(); err != nil {
		return nil, err
	}
	ws := make([][]float32, p.Groups())
	for g, w := range p.W {
		ws[g] = to32(w)
	}
	wd, wm, err := format.EncodeProjections(ws, p.Layers, p.KVHeads, p.Dim, p.HeadDim)
	if err != nil {
		return nil, err
	}
	out := []Artifact{{store.ArtifactRouterW, wd, wm}}
	for _, a := range []struct {
		name string
		v    []float64
	}{{store.ArtifactRouterBias, p.Bias}, {store.ArtifactTau, p.Tau}, {store.ArtifactRouterRecency, p.Recency}} {
		d, m, err := store.EncodeHeadValues(to32(a.v), p.Layers, p.KVHeads)
		if err != nil {
			return nil, err
		}
		out = append(out, Artifact{a.name, d, m})
	}
	return out, nil
}

// FromArtifacts decodes routers stored by Artifacts, for a model of the
// given shape; without a recency artifact (routers stored before it
// existed) the recency weights are 0. Errors wrap ErrInvalidArgument or
// the format's.
func FromArtifacts(arts []Artifact, layers, kvHeads, headDim int) (*Params, error) {
	p := &Params{Layers: layers, KVHeads: kvHeads, HeadDim: headDim}
	seen := 0
	for _, a := range arts {
		switch a.Name {
		case store.ArtifactRouterW:
			dim, ws, err := format.DecodeProjections(a.Data, a.Meta, layers, kvHeads, headDim)
			if err != nil {
				return nil, fmt.Errorf("router: %s: %w", a.Name, err)
			}
			p.Dim = dim
			for _, w := range ws {
				p.W = append(p.W, to64(w))
			}
		case store.ArtifactRouterBias, store.ArtifactTau, store.ArtifactRouterRecency:
			v, err := store.DecodeHeadValues(a.Data, a.Meta, layers, kvHeads)
			if err != nil {
				return nil, fmt.Errorf("router: %s: %w", a.Name, err)
			}
			switch a.Name {
			case store.ArtifactTau:
				p.Tau = to64(v)
			case store.ArtifactRouterBias:
				p.Bias = to64(v)
			default:
				p.Recency = to64(v)
				continue // optional: not counted
			}
		default:
			continue
		}
		seen++
	}
	if seen != 3 {
		return nil, fmt.Errorf("%w: router artifacts: %d of W, bias and tau", ErrInvalidArgument, seen)
	}
	if p.Recency == nil {
		p.Recency = make([]float64, p.Groups())
	}
	return p, p.check()
}

func to32(x []float64) []float32 {
	out := make([]float32, len(x))
	for i, v := range x {
		out[i] = float32(v)
	}
	return out
}

func to64(x []float32) []float64 {
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = float64(v)
	}
	return out
}

// Put stores p's artifacts in db for model fp (store.PutArtifact), where
// span memory's Routing of that model finds them.
func (p *Params) Put(db *store.DB, fp format.Fingerprint) error {
	arts, err := p.Artifacts()
	if err != nil {
		return err
	}
	for _, a := range arts {
		if err := db.PutArtifact(fp, a.Name, a.Data, a.Meta); err != nil {
			return fmt.Errorf("router: storing %s: %w", a.Name, err)
		}
	}
	return nil
}

// Get reads the router artifacts of model fp from db: W, bias and tau, and
// the recency weights where stored. Errors wrap store.ErrNotFound when one
// of the first three is missing.
func Get(db *store.DB, fp format.Fingerprint) ([]Artifact, error) {
	metas := map[string]store.ArtifactMeta{}
	if err := db.Artifacts(func(i store.ArtifactInfo) error {
		if i.Model == fp {
			metas[i.Name] = i.Meta
		}
		return nil
	}); err != nil {
		return nil, err
	}
	var out []Artifact
	for _, name := range []string{store.ArtifactRouterW, store.ArtifactRouterBias, store.ArtifactTau, store.ArtifactRouterRecency} {
		meta, ok := metas[name]
		if !ok && name == store.ArtifactRouterRecency {
			continue
		}
		if !ok {
			return nil, fmt.Errorf("%w: router artifact %s of model %s", store.ErrNotFound, name, fp.Short())
		}
		data, err := db.GetArtifact(fp, name)
		if err != nil {
			return nil, fmt.Errorf("router: %s: %w", name, err)
		}
		out = append(out, Artifact{name, data, meta})
	}
	return out, nil
}
