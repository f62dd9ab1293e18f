package llama

import "math"

// Probs turns one row of logits into a probability distribution, in
// float64 so that KL between two close distributions is not lost to
// rounding.
func Probs(logits []float32) []float64 {
	mx := math.Inf(-1)
	for _, l := range logits {
		mx = math.Max(mx, float64(l))
	}
	p := make([]float64, len(logits))
	var sum float64
	for i, l := range logits {
		p[i] = math.Exp(float64(l) - mx)
		sum += p[i]
	}
	for i := range p {
		p[i] /= sum
	}
	return p
}

// KL is the Kullback-Leibler divergence KL(p || q) in nats. Terms where p
// is 0 contribute nothing; a q of 0 where p is not gives +Inf.
func KL(p, q []float64) float64 {
	var s float64
	for i := range p {
		if p[i] > 0 {
			s += p[i] * math.Log(p[i]/q[i])
		}
	}
	return s
}

// Argmax is the index of the largest probability (the first, on ties).
func Argmax(p []float64) int {
	best := 0
	for i, v := range p {
		if v > p[best] {
			best = i
		}
	}
	return best
}

// LogProbs is log softmax(logits) in float64.
func LogProbs(logits []float32) []float64 {
	mx := math.Inf(-1)
	for _, v := range logits {
		mx = math.Max(mx, float64(v))
	}
	var sum float64
	for _, v := range logits {
		sum += math.Exp(float64(v) - mx)
	}
	lse := mx + math.Log(sum)
	out := make([]float64, len(logits))
	for i, v := range logits {
		out[i] = float64(v) - lse
	}
	return out
}

// LogitsKL is KL(p || q) of the distributions of two logit rows, computed
// through log-probabilities (so a tiny q does not overflow) and clamped at
// 0 against rounding.
func LogitsKL(p, q []float32) float64 {
	lp, lq := LogProbs(p), LogProbs(q)
	var d float64
	for i := range lp {
		d += math.Exp(lp[i]) * (lp[i] - lq[i])
	}
	return math.Max(d, 0)
}

// LogitsArgmax is the index of the largest logit (the first, on ties).
func LogitsArgmax(x []float32) int {
	best := 0
	for i, v := range x {
		if v > x[best] {
			best = i
		}
	}
	return best
}
