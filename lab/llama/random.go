package llama

import (
	"math"
	"math/rand/v2"
)

// Random builds a model of shape cfg with deterministic random weights: the
// same cfg and seed give the same model on every machine and release of
// this package. The classifier is separate from the embedding.
//
// Scales keep activations finite and attention non-trivial: embeddings are
// N(0, 1), norm gains 1 +- 0.1, matrices N(0, 1/in) (the query and key
// projections 1.5x that, so that attention scores spread over a few units),
// and the classifier 3/sqrt(dim) so that next-token distributions are
// peaked enough for greedy decoding to be stable.
func Random(cfg Config, seed uint64) (*Model, error) {
	m, err := newModel(cfg, false)
	if err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(seed, 0x6c6c616d61)) // "llama"
	normal := func(t []float32, std float64) {
		for i := range t {
			t[i] = float32(rng.NormFloat64() * std)
		}
	}
	gain := func(t []float32) {
		for i := range t {
			t[i] = float32(1 + 0.1*(2*rng.Float64()-1))
		}
	}
	inv := func(n int) float64 { return 1 / math.Sqrt(float64(n)) }
	normal(m.embed, 1)
	for l := range m.layers {
		w := &m.layers[l]
		gain(w.attnNorm)
		normal(w.wq, 1.5*inv(cfg.Dim))
		normal(w.wk, 1.5*inv(cfg.Dim))
		normal(w.wv, inv(cfg.Dim))
		normal(w.wo, inv(cfg.Dim))
		gain(w.ffnNorm)
		normal(w.w1, inv(cfg.Dim))
		normal(w.w3, inv(cfg.Dim))
		normal(w.w2, inv(cfg.Hidden))
	}
	gain(m.normOut)
	normal(m.classifier, 3*inv(cfg.Dim))
	return m, nil
}
