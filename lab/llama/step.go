package llama

import (
	"fmt"
	"math"

	"github.com/kvstore/kvstore/format"
)

// StepAttention is one layer's attention for one decoded token, handed to
// an AttendFunc: the token's query, key and value, and the buffer its
// attention output goes to. Slices are the model's scratch: valid during
// the call only; copy what must outlive it.
type StepAttention struct {
	Layer int
	Pos   int64 // the token's position
	// Q and QPre are the query heads, [Heads][HeadDim], after and before
	// RoPE at Pos.
	Q, QPre []float32
	// K, KPre and V are the token's own key (after and before RoPE) and
	// value, [KVHeads][HeadDim]. Attention normally covers the token
	// itself, so the callee adds them to whatever rows it attends over.
	K, KPre, V []float32
	// Out is [Heads][HeadDim], zero on entry: the callee writes each query
	// head's attention output (the weighted sum of values).
	Out []float32
}

// AttendFunc computes one layer's attention for a Step: the hook through
// which a caller replaces the model's cache with any memory of its own (a
// compressed one, a reconstructed one) and keeps everything else of the
// forward pass exact.
type AttendFunc func(a *StepAttention) error

// Step runs one token at position pos through the model, as Forward does
// for one token with LastOnly, except that each layer's attention is
// computed by attend. It returns the next-token logits. When attend does
// what Forward does (Attend over the cache's rows then the token's own),
// the logits are bit-identical to Forward's: the rest of the arithmetic is
// shared. An error from attend stops the step and is returned wrapped.
func (m *Model) Step(token int, pos int64, attend AttendFunc) ([]float32, error) {
	if token < 0 || token >= m.Vocab {
		return nil, fmt.Errorf("%w: llama: step: token %d outside vocab [0, %d)", format.ErrInvalidArgument, token, m.Vocab)
	}
	d := m.Dim
	x := append([]float32(nil), m.embed[token*d:(token+1)*d]...)
	for l := range m.layers {
		if err := m.stepAttention(l, x, pos, attend); err != nil {
			return nil, fmt.Errorf("llama: step at position %d, layer %d: %w", pos, l, err)
		}
		m.ffnBlock(l, x)
	}
	xb := make([]float32, d)
	rmsnorm(xb, x, m.normOut, m.NormEps)
	logits := make([]float32, m.Vocab)
	matmul(logits, xb, m.classifier, 1, d, m.Vocab)
	return logits, nil
}

// stepAttention is attentionBlock for one token with attention delegated.
func (m *Model) stepAttention(l int, x []float32, pos int64, attend AttendFunc) error {
	w := &m.layers[l]
	d, hd, kvd := m.Dim, m.HeadDim(), m.KVDim()
	xb := make([]float32, d)
	rmsnorm(xb, x, w.attnNorm, m.NormEps)
	a := &StepAttention{Layer: l, Pos: pos,
		Q: make([]float32, d), K: make([]float32, kvd), V: make([]float32, kvd), Out: make([]float32, d)}
	matmul(a.Q, xb, w.wq, 1, d, d)
	matmul(a.K, xb, w.wk, 1, d, kvd)
	matmul(a.V, xb, w.wv, 1, d, kvd)
	a.QPre, a.KPre = append([]float32(nil), a.Q...), append([]float32(nil), a.K...)
	for h := range m.Heads {
		m.rope.Apply(a.Q[h*hd:(h+1)*hd], pos)
	}
	for g := range m.KVHeads {
		m.rope.Apply(a.K[g*hd:(g+1)*hd], pos)
	}
	if err := attend(a); err != nil {
		return err
	}
	o := make([]float32, d)
	matmul(o, a.Out, w.wo, 1, d, d)
	for i := range x {
		x[i] += o[i]
	}
	return nil
}

// Attend is the model's attention for one query head: softmax of
// q.k/sqrt(len(q)) over the rows of keys ([rows][len(q)]), plus bias[t]
// when bias is not nil, then the weighted sum of vals added to out. With a
// nil bias its arithmetic is exactly Forward's, so a caller attending over
// the rows Forward would use gets Forward's bits. A bias of ln(n) makes one
// row stand for n identical ones (a span summary). It panics when the
// lengths disagree, a programming error.
func Attend(out, q, keys, vals, bias []float32) {
	hd := len(q)
	rows := len(keys) / hd
	if len(keys) != rows*hd || len(vals) != len(keys) || len(out) != hd || (bias != nil && len(bias) != rows) || rows == 0 {
		panic(fmt.Sprintf("llama: attend: %d keys, %d values, %d biases, %d out for head dim %d", len(keys), len(vals), len(bias), len(out), hd))
	}
	att := make([]float32, rows)
	scale := float32(math.Sqrt(float64(hd)))
	for t := range att {
		var s float32
		for j, qj := range q {
			s += qj * keys[t*hd+j]
		}
		att[t] = s / scale
		if bias != nil {
			att[t] += bias[t]
		}
	}
	softmax(att)
	for t, p := range att {
		for j := range out {
			out[j] += p * vals[t*hd+j]
		}
	}
}
