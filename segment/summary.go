package segment

import (
	"fmt"
	"math"

	"github.com/kvstore/kvstore/format"
)

// Summary is what stays on the GPU for one span in one (layer, KV head).
type Summary struct {
	// Key and Value are the surprisal-weighted means of the span's pre-RoPE
	// keys and its values (HeadDim each).
	Key, Value []float32
	// Proj is Key projected to the routing dimension (Dim elements), nil
	// when no projection was given.
	Proj []float32
}

// Weights returns the weight of each token of a span in its summary: the
// token's surprisal normalised to sum to 1. The weights are linear in
// surprisal rather than a softmax of it because exp(H_t) = 1/p(x_t) would
// hand the whole mean to the single rarest token.
//
// A NaN, negative or -Inf surprisal weighs 0. If any surprisal is +Inf the
// weights are the limit of the normalisation: equal over the +Inf tokens,
// 0 elsewhere. If every weight is 0 (all NaN, all zero) the weights are
// equal: the summary is the plain mean. Sums run in float64.
func Weights(surprisal []float32) []float64 {
	w := make([]float64, len(surprisal))
	var sum float64
	for i, h := range surprisal {
		if math.IsInf(float64(h), 1) {
			return indicatorWeights(w, surprisal)
		}
		if v := float64(h); v > 0 && !math.IsInf(v, 0) {
			w[i] = v
			sum += v
		}
	}
	if sum == 0 {
		for i := range w {
			w[i] = 1 / float64(len(w))
		}
		return w
	}
	for i := range w {
		w[i] /= sum
	}
	return w
}

// indicatorWeights spreads the weight equally over the +Inf tokens.
func indicatorWeights(w []float64, surprisal []float32) []float64 {
	count := 0
	for i, h := range surprisal {
		w[i] = 0
		if math.IsInf(float64(h), 1) {
			w[i] = 1
			count++
		}
	}
	for i := range w {
		w[i] /= float64(count)
	}
	return w
}

// Summarize summarises one span in one (layer, KV head): keys and values
// are the span's rows ([tokens][headDim], keys pre-RoPE, see
// reconstruct.Unapply) and surprisal its tokens' surprisals. p may be nil
// (no Proj). Means accumulate in float64 and are rounded once. Errors wrap
// format.ErrInvalidArgument: mismatched lengths, an empty span, non-finite
// keys or values, or a projection of another head dim.
func Summarize(keys, values []float32, headDim int, surprisal []float32, p *Projection) (*Summary, error) {
	tokens := len(surprisal)
	switch {
	case headDim < 1 || tokens == 0:
		return nil, fmt.Errorf("%w: summarize: %d tokens of head dim %d", format.ErrInvalidArgument, tokens, headDim)
	case len(keys) != tokens*headDim || len(values) != tokens*headDim:
		return nil, fmt.Errorf("%w: summarize: %d key and %d value floats for %d tokens of head dim %d",
			format.ErrInvalidArgument, len(keys), len(values), tokens, headDim)
	case p != nil && p.HeadDim != headDim:
		return nil, fmt.Errorf("%w: summarize: projection of head dim %d for head dim %d", format.ErrInvalidArgument, p.HeadDim, headDim)
	case !allFinite(keys) || !allFinite(values):
		return nil, fmt.Errorf("%w: summarize: non-finite key or value", format.ErrInvalidArgument)
	}
	w := Weights(surprisal)
	s := &Summary{Key: weightedMean(keys, w, headDim), Value: weightedMean(values, w, headDim)}
	if p != nil {
		s.Proj = p.Project(nil, s.Key)
	}
	return s, nil
}

// SummarizeSpans summarises every span of a sequence in one (layer, KV
// head): keys and values hold the whole sequence ([tokens][headDim], the
// layout of one head in a packet chunk), surprisal one value per token.
// Unfactored spans are summarised too. Errors are Summarize's.
func SummarizeSpans(keys, values []float32, headDim int, surprisal []float32, spans []Span, p *Projection) ([]Summary, error) {
	if headDim < 1 || len(keys) != len(surprisal)*headDim || len(values) != len(keys) {
		return nil, fmt.Errorf("%w: summarize spans: %d key and %d value floats for %d tokens of head dim %d",
			format.ErrInvalidArgument, len(keys), len(values), len(surprisal), headDim)
	}
	out := make([]Summary, len(spans))
	for i, sp := range spans {
		if sp.Start < 0 || sp.End > len(surprisal) || sp.Start >= sp.End {
			return nil, fmt.Errorf("%w: summarize spans: span %d [%d, %d) outside %d tokens",
				format.ErrInvalidArgument, i, sp.Start, sp.End, len(surprisal))
		}
		s, err := Summarize(keys[sp.Start*headDim:sp.End*headDim], values[sp.Start*headDim:sp.End*headDim],
			headDim, surprisal[sp.Start:sp.End], p)
		if err != nil {
			return nil, fmt.Errorf("span %d: %w", i, err)
		}
		out[i] = *s
	}
	return out, nil
}

// ProjectedKeys lays the summaries' Proj vectors end to end (len(sums) rows
// of dim), the form routing takes. Summaries without a Proj of dim
// elements give an error wrapping format.ErrInvalidArgument.
func ProjectedKeys(sums []Summary, dim int) ([]float32, error) {
	out := make([]float32, 0, len(sums)*dim)
	for i, s := range sums {
		if len(s.Proj) != dim {
			return nil, fmt.Errorf("%w: projected keys: summary %d has %d projected dims, want %d",
				format.ErrInvalidArgument, i, len(s.Proj), dim)
		}
		out = append(out, s.Proj...)
	}
	return out, nil
}

func weightedMean(rows []float32, w []float64, headDim int) []float32 {
	acc := make([]float64, headDim)
	for t, wt := range w {
		if wt == 0 {
			continue
		}
		for j, v := range rows[t*headDim : (t+1)*headDim] {
			acc[j] += wt * float64(v)
		}
	}
	out := make([]float32, headDim)
	for j, a := range acc {
		out[j] = float32(a)
	}
	return out
}
