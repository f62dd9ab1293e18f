package quality

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/kvstore/kvstore/internal/llama"
)

// sample draws n tokens after bos from the model at temperature 1 (bos
// included as the first), deterministically for a seed.
func sample(m *llama.Model, bos, n int, seed uint64) ([]int, error) {
	rng := rand.New(rand.NewPCG(seed, 0x5e4b56))
	toks := []int{bos}
	res, err := m.Forward(toks, 0, nil, llama.ForwardOptions{LastOnly: true})
	if err != nil {
		return nil, err
	}
	for len(toks) < n {
		next := draw(res.Logits[0], rng)
		toks = append(toks, next)
		if len(toks) == n {
			break
		}
		if res, err = m.Forward([]int{next}, int64(len(toks)-1), res.Cache, llama.ForwardOptions{LastOnly: true}); err != nil {
			return nil, fmt.Errorf("quality: sampling token %d: %w", len(toks), err)
		}
	}
	return toks, nil
}

// draw samples an index from softmax(logits).
func draw(logits []float32, rng *rand.Rand) int {
	lp := llama.LogProbs(logits)
	u := rng.Float64()
	var acc float64
	for i, v := range lp {
		acc += math.Exp(v)
		if u < acc {
			return i
		}
	}
	return len(lp) - 1
}
