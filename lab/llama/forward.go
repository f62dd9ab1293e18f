package llama

import (
	"fmt"
	"math"

	"github.com/kvstore/kvstore/format"
)

// ForwardOptions are the per-call settings of Forward. The zero value
// prefills at consecutive positions and returns every token's logits.
type ForwardOptions struct {
	// Positions, when not nil, gives each token's absolute position
	// (len(tokens) of them) in place of startPos, startPos+1, ...
	Positions []int64
	// LastOnly computes the logits of the last token only; Surprisal is
	// then nil.
	LastOnly bool
	// Attention asks for the attention probabilities (Result.Attention).
	Attention bool
}

// Result is what Forward computed.
type Result struct {
	// Logits are the next-token logits after each token: [tokens][vocab],
	// or [1][vocab] (the last token's) with LastOnly.
	Logits [][]float32
	// Surprisal[i] = -ln p(tokens[i+1] | cache, tokens[:i+1]) in nats: the
	// surprisal of the next given token, from Logits[i] in float64. The last
	// entry is NaN (its next token is not given), so SeKV's H_t of token t
	// is Surprisal[t-1]. Nil with LastOnly.
	Surprisal []float64
	// Attention[layer][head][query][key], only when asked: the softmax
	// weights of each query token over the cache rows, the key index
	// running over all Cache.Len() rows after the call (the cache as given,
	// then the new tokens). Entries of keys after the query are 0.
	Attention [][][][]float32
	// Cache is the cache passed in (or a new one) with the new tokens'
	// keys, values and positions appended.
	Cache *Cache
}

// Forward runs tokens through the model at positions startPos,
// startPos+1, ... (or opts.Positions), each attending over every row of
// cache (any positions, any producer) and causally over the tokens before
// it in this call, and appends their keys and values to cache. A nil cache
// starts an empty one. On error nothing is appended.
func (m *Model) Forward(tokens []int, startPos int64, cache *Cache, opts ForwardOptions) (*Result, error) {
	if cache == nil {
		cache = m.NewCache()
	}
	pos, err := m.checkForward(tokens, startPos, cache, opts)
	if err != nil {
		return nil, err
	}
	d := m.Dim
	x := make([]float32, len(tokens)*d)
	for i, t := range tokens {
		copy(x[i*d:(i+1)*d], m.embed[t*d:(t+1)*d])
	}
	return m.forward(x, pos, cache, opts, tokens), nil
}

// forward runs the input embeddings x ([len(pos)][Dim], overwritten: it
// becomes the residual stream) through the model over a checked cache.
// tokens, when not nil, are the inputs' token ids, for Surprisal.
func (m *Model) forward(x []float32, pos []int64, cache *Cache, opts ForwardOptions, tokens []int) *Result {
	n, d := len(pos), m.Dim
	res := &Result{Cache: cache}
	if opts.Attention {
		res.Attention = make([][][][]float32, m.Layers)
	}
	for l := range m.layers {
		probs := m.attentionBlock(l, x, pos, cache, opts.Attention)
		if opts.Attention {
			res.Attention[l] = probs
		}
		m.ffnBlock(l, x)
	}
	cache.Positions = append(cache.Positions, pos...)
	first := 0
	if opts.LastOnly {
		first = n - 1
	}
	xb := make([]float32, d)
	for i := first; i < n; i++ {
		rmsnorm(xb, x[i*d:(i+1)*d], m.normOut, m.NormEps)
		logits := make([]float32, m.Vocab)
		matmul(logits, xb, m.classifier, 1, d, m.Vocab)
		res.Logits = append(res.Logits, logits)
	}
	if !opts.LastOnly && tokens != nil {
		res.Surprisal = surprisal(res.Logits, tokens)
	}
	return res
}

// checkForward validates the call and returns each token's position.
func (m *Model) checkForward(tokens []int, startPos int64, cache *Cache, opts ForwardOptions) ([]int64, error) {
	if len(tokens) == 0 {
		return nil, fmt.Errorf("%w: llama: forward of no tokens", format.ErrInvalidArgument)
	}
	for i, t := range tokens {
		if t < 0 || t >= m.Vocab {
			return nil, fmt.Errorf("%w: llama: token %d at index %d outside vocab [0, %d)", format.ErrInvalidArgument, t, i, m.Vocab)
		}
	}
	return m.checkPositions(len(tokens), startPos, cache, opts)
}

// checkPositions validates the cache and positions of a forward pass over n
// inputs and returns each input's position.
func (m *Model) checkPositions(n int, startPos int64, cache *Cache, opts ForwardOptions) ([]int64, error) {
	if opts.Positions != nil && len(opts.Positions) != n {
		return nil, fmt.Errorf("%w: llama: %d positions for %d tokens", format.ErrInvalidArgument, len(opts.Positions), n)
	}
	if err := cache.check(m.Layers, m.KVHeads, m.HeadDim()); err != nil {
		return nil, err
	}
	if opts.Positions != nil {
		return append([]int64(nil), opts.Positions...), nil
	}
	pos := make([]int64, n)
	for i := range pos {
		pos[i] = startPos + int64(i)
	}
	return pos, nil
}

// attentionBlock adds layer l's attention output to the residual stream x
// ([n][Dim]), appending the tokens' keys and values to the cache first. It
// returns the attention probabilities [head][query][key] when asked.
func (m *Model) attentionBlock(l int, x []float32, pos []int64, cache *Cache, keep bool) [][][]float32 {
	w := &m.layers[l]
	n, d, hd, kvd := len(pos), m.Dim, m.HeadDim(), m.KVDim()
	xb := make([]float32, n*d)
	for i := range n {
		rmsnorm(xb[i*d:(i+1)*d], x[i*d:(i+1)*d], w.attnNorm, m.NormEps)
	}
	q, k, v := make([]float32, n*d), make([]float32, n*kvd), make([]float32, n*kvd)
	matmul(q, xb, w.wq, n, d, d)
	matmul(k, xb, w.wk, n, d, kvd)
	matmul(v, xb, w.wv, n, d, kvd)
	kPre := append([]float32(nil), k...)
	for i, p := range pos {
		for h := range m.Heads {
			m.rope.Apply(q[i*d+h*hd:i*d+(h+1)*hd], p)
		}
		for g := range m.KVHeads {
			m.rope.Apply(k[i*kvd+g*hd:i*kvd+(g+1)*hd], p)
		}
	}
	past := cache.Len()
	kv := &cache.Layers[l]
	kv.K = appendRows(kv.K, headMajor(k, n, m.KVHeads, hd), m.KVHeads, past, n, hd)
	kv.V = appendRows(kv.V, headMajor(v, n, m.KVHeads, hd), m.KVHeads, past, n, hd)
	if len(kv.KPre) != 0 || past == 0 {
		kv.KPre = appendRows(kv.KPre, headMajor(kPre, n, m.KVHeads, hd), m.KVHeads, past, n, hd)
	}
	out := make([]float32, n*d)
	var probs [][][]float32
	if keep {
		probs = make([][][]float32, m.Heads)
	}
	total := past + n
	for h := range m.Heads {
		g := h / (m.Heads / m.KVHeads)
		keys, vals := kv.K[g*total*hd:(g+1)*total*hd], kv.V[g*total*hd:(g+1)*total*hd]
		for i := range n {
			att := make([]float32, total)
			attend(out[i*d+h*hd:i*d+(h+1)*hd], att[:past+i+1], q[i*d+h*hd:i*d+(h+1)*hd], keys, vals)
			if keep {
				probs[h] = append(probs[h], att)
			}
		}
	}
	o := make([]float32, n*d)
	matmul(o, out, w.wo, n, d, d)
	for i := range x {
		x[i] += o[i]
	}
	return probs
}

// attend computes one query head's softmax attention over the first
// len(att) rows of keys and vals ([rows][hd]), writing the weights to att
// and the weighted sum of values to out, as llama2.c does.
func attend(out, att, q, keys, vals []float32) {
	hd := len(q)
	scale := float32(math.Sqrt(float64(hd)))
	for t := range att {
		var s float32
		for j, qj := range q {
			s += qj * keys[t*hd+j]
		}
		att[t] = s / scale
	}
	softmax(att)
	for t, a := range att {
		for j := range out {
			out[j] += a * vals[t*hd+j]
		}
	}
}

// ffnBlock adds layer l's SwiGLU feed-forward output to x.
func (m *Model) ffnBlock(l int, x []float32) {
	w := &m.layers[l]
	d, hid := m.Dim, m.Hidden
	n := len(x) / d
	xb := make([]float32, n*d)
	for i := range n {
		rmsnorm(xb[i*d:(i+1)*d], x[i*d:(i+1)*d], w.ffnNorm, m.NormEps)
	}
	h1, h3 := make([]float32, n*hid), make([]float32, n*hid)
	matmul(h1, xb, w.w1, n, d, hid)
	matmul(h3, xb, w.w3, n, d, hid)
	for i, a := range h1 {
		h1[i] = a * (1 / (1 + float32(math.Exp(float64(-a))))) * h3[i]
	}
	o := make([]float32, n*d)
	matmul(o, h1, w.w2, n, hid, d)
	for i := range x {
		x[i] += o[i]
	}
}

// headMajor turns [n][heads][hd] into [heads][n][hd].
func headMajor(x []float32, n, heads, hd int) []float32 {
	out := make([]float32, len(x))
	for i := range n {
		for h := range heads {
			copy(out[(h*n+i)*hd:(h*n+i+1)*hd], x[(i*heads+h)*hd:(i*heads+h+1)*hd])
		}
	}
	return out
}

// rmsnorm sets out = w * x / sqrt(mean(x^2) + eps).
func rmsnorm(out, x, w []float32, eps float32) {
	var ss float32
	for _, v := range x {
		ss += v * v
	}
	ss = ss/float32(len(x)) + eps
	inv := 1 / float32(math.Sqrt(float64(ss)))
	for i, v := range x {
		out[i] = w[i] * (inv * v)
	}
}

// matmul sets out[i][o] = sum_k x[i][k] * w[o][k] for n rows of x.
func matmul(out, x, w []float32, n, in, outDim int) {
	for i := range n {
		xi := x[i*in : (i+1)*in]
		for o := range outDim {
			wo := w[o*in : (o+1)*in]
			var s float32
			for k, v := range xi {
				s += v * wo[k]
			}
			out[i*outDim+o] = s
		}
	}
}

// softmax normalises x in place, subtracting the max first.
func softmax(x []float32) {
	mx := x[0]
	for _, v := range x[1:] {
		mx = max(mx, v)
	}
	var sum float32
	for i, v := range x {
		x[i] = float32(math.Exp(float64(v - mx)))
		sum += x[i]
	}
	for i := range x {
		x[i] /= sum
	}
}

// surprisal is -ln softmax(logits[i])[tokens[i+1]] per token, NaN last.
func surprisal(logits [][]float32, tokens []int) []float64 {
	s := make([]float64, len(tokens))
	for i := range s {
		if i == len(tokens)-1 {
			s[i] = math.NaN()
			continue
		}
		l := logits[i]
		mx := float64(l[0])
		for _, v := range l {
			mx = math.Max(mx, float64(v))
		}
		var sum float64
		for _, v := range l {
			sum += math.Exp(float64(v) - mx)
		}
		s[i] = mx + math.Log(sum) - float64(l[tokens[i+1]])
	}
	return s
}

// Greedy decodes n tokens after prompt (prefilled from position 0), each
// the argmax of the previous logits, and returns them.
func (m *Model) Greedy(prompt []int, n int) ([]int, error) {
	res, err := m.Forward(prompt, 0, nil, ForwardOptions{LastOnly: true})
	if err != nil {
		return nil, err
	}
	var out []int
	for len(out) < n {
		next := argmax(res.Logits[0])
		out = append(out, next)
		if len(out) == n {
			break
		}
		if res, err = m.Forward([]int{next}, int64(len(prompt)+len(out)-1), res.Cache, ForwardOptions{LastOnly: true}); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func argmax(x []float32) int {
	best := 0
	for i, v := range x {
		if v > x[best] {
			best = i
		}
	}
	return best
}
