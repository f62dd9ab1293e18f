package llama

import (
	"fmt"
	"math"

	"github.com/kvstore/kvstore/format"
)

// A gated step is Step in float64 where each context row of a (layer, KV
// head) is weighted in attention by a gate z in [0, 1]:
//
//	a_r = z_r exp(l_r) / (sum_r' z_r' exp(l_r') + exp(l_own))
//
// (l_r the row's logit q.k_r/sqrt(head_dim), the token's own row always
// attended). With every z 0 or 1 it is Step over the rows whose gate is 1.
// Its backward pass gives the gradient of a loss of the logits with respect
// to every gate, zero or not: dL/dz_r = exp(l_r)/S (dL/da_r - sum_r' a_r'
// dL/da_r'), how the loss would move if the row were let in a little. That
// is what a straight-through zoom decision is trained by (lab/router's
// distillation term).

// GateRows is one (layer, KV head)'s context rows at a gated step.
type GateRows struct {
	// K (post-RoPE) and V are the rows, [rows][HeadDim].
	K, V []float32
	// Gate is per row the index into Z of the gate weighing it, or -1 for
	// a row always attended.
	Gate []int32
	// Z are the group's gate values, each in [0, 1].
	Z []float64
}

// GateFunc returns the context rows of every KV head of layer l for a
// gated step, given the step's pre-RoPE queries, [Heads][HeadDim] (a
// router reads them).
type GateFunc func(layer int, qPre []float64) ([]GateRows, error)

// GateTape is a gated step's forward pass: its logits and what its backward
// pass reads.
type GateTape struct {
	m      *Model
	pos    int64
	layers []gateLayer
	xOut   []float64
	// Logits are the next-token logits.
	Logits []float64
}

type gateLayer struct {
	ffn     layerTape // xMid, xn2, h1, h3: ffnBack64's inputs
	xIn     []float64
	q, k, v []float64 // post-RoPE query heads [Dim], own key and value [KVDim]
	rows    []GateRows
	att     [][]float64 // per query head: weights over the rows, then the own row
	free    [][]float64 // per query head and row: exp(l_r)/S, the weight at gate 1
}

// GateForward runs token at pos through the model with each layer's
// context rows and gates from rows. Errors wrap format.ErrInvalidArgument
// (rows of the wrong shape, a gate out of range or outside [0, 1]) or are
// rows' own, wrapped.
func (m *Model) GateForward(token int, pos int64, rows GateFunc) (*GateTape, error) {
	if token < 0 || token >= m.Vocab {
		return nil, fmt.Errorf("%w: llama: gated step: token %d outside vocab [0, %d)", format.ErrInvalidArgument, token, m.Vocab)
	}
	d := m.Dim
	t := &GateTape{m: m, pos: pos, layers: make([]gateLayer, m.Layers)}
	x := m.embed64([]int{token})
	for l := range m.layers {
		var err error
		if x, err = m.gateAttention(l, x, pos, rows, &t.layers[l]); err != nil {
			return nil, fmt.Errorf("llama: gated step at position %d, layer %d: %w", pos, l, err)
		}
		x = m.ffn64(l, x, &t.layers[l].ffn)
	}
	t.xOut = x
	xb := make([]float64, d)
	rmsnorm64(xb, x, m.normOut, float64(m.NormEps))
	t.Logits = make([]float64, m.Vocab)
	matmul64(t.Logits, xb, m.classifier, 1, d, m.Vocab)
	return t, nil
}

func (m *Model) gateAttention(l int, x []float64, pos int64, rowsOf GateFunc, gl *gateLayer) ([]float64, error) {
	w := &m.layers[l]
	d, hd, kvd := m.Dim, m.HeadDim(), m.KVDim()
	gl.xIn = x
	xn := make([]float64, d)
	rmsnorm64(xn, x, w.attnNorm, float64(m.NormEps))
	gl.q, gl.k, gl.v = make([]float64, d), make([]float64, kvd), make([]float64, kvd)
	matmul64(gl.q, xn, w.wq, 1, d, d)
	matmul64(gl.k, xn, w.wk, 1, d, kvd)
	matmul64(gl.v, xn, w.wv, 1, d, kvd)
	rows, err := rowsOf(l, append([]float64(nil), gl.q...))
	if err != nil {
		return nil, err
	}
	if err := m.checkGateRows(rows); err != nil {
		return nil, err
	}
	gl.rows = rows
	for h := range m.Heads {
		m.rope64(gl.q[h*hd:(h+1)*hd], pos, true, false)
	}
	for g := range m.KVHeads {
		m.rope64(gl.k[g*hd:(g+1)*hd], pos, true, false)
	}
	gl.att, gl.free = make([][]float64, m.Heads), make([][]float64, m.Heads)
	out := make([]float64, d)
	scale := math.Sqrt(float64(hd))
	per := m.Heads / m.KVHeads
	for h := range m.Heads {
		g := h / per
		rs := rows[g]
		n := len(rs.K) / hd
		q := gl.q[h*hd : (h+1)*hd]
		lg := make([]float64, n+1)
		mx := math.Inf(-1)
		for r := range n {
			var s float64
			for j, v := range rs.K[r*hd : (r+1)*hd] {
				s += q[j] * float64(v)
			}
			lg[r] = s / scale
			mx = math.Max(mx, lg[r])
		}
		lg[n] = dot64(q, gl.k[g*hd:(g+1)*hd]) / scale
		mx = math.Max(mx, lg[n])
		a, free := make([]float64, n+1), make([]float64, n+1)
		var sum float64
		for r, v := range lg {
			free[r] = math.Exp(v - mx)
			a[r] = free[r]
			if r < n && rs.Gate[r] >= 0 {
				a[r] *= rs.Z[rs.Gate[r]]
			}
			sum += a[r]
		}
		o := out[h*hd : (h+1)*hd]
		for r := range a {
			a[r] /= sum
			free[r] /= sum
			if r < n {
				for j, v := range rs.V[r*hd : (r+1)*hd] {
					o[j] += a[r] * float64(v)
				}
			}
		}
		axpy64(o, a[n], gl.v[g*hd:(g+1)*hd])
		gl.att[h], gl.free[h] = a, free
	}
	xo := make([]float64, d)
	matmul64(xo, out, w.wo, 1, d, d)
	for i := range xo {
		xo[i] += x[i]
	}
	return xo, nil
}

func (m *Model) checkGateRows(rows []GateRows) error {
	hd := m.HeadDim()
	if len(rows) != m.KVHeads {
		return fmt.Errorf("%w: %d row sets for %d KV heads", format.ErrInvalidArgument, len(rows), m.KVHeads)
	}
	for g, rs := range rows {
		n := len(rs.K) / hd
		if len(rs.K) != n*hd || len(rs.V) != len(rs.K) || len(rs.Gate) != n {
			return fmt.Errorf("%w: KV head %d: %d key, %d value floats and %d gates, not rows of %d", format.ErrInvalidArgument, g, len(rs.K), len(rs.V), len(rs.Gate), hd)
		}
		for _, z := range rs.Z {
			if !(z >= 0 && z <= 1) {
				return fmt.Errorf("%w: KV head %d: gate %v outside [0, 1]", format.ErrInvalidArgument, g, z)
			}
		}
		for r, i := range rs.Gate {
			if i < -1 || int(i) >= len(rs.Z) {
				return fmt.Errorf("%w: KV head %d: row %d's gate %d of %d", format.ErrInvalidArgument, g, r, i, len(rs.Z))
			}
		}
	}
	return nil
}

// Backward returns the gradient of a loss with respect to every gate,
// [layer][KV head][gate] shaped as the rows' Z, given its gradient with
// respect to the logits.
func (t *GateTape) Backward(dLogits []float64) [][][]float64 {
	m := t.m
	d, hd, kvd := m.Dim, m.HeadDim(), m.KVDim()
	dz := make([][][]float64, m.Layers)
	dx := make([]float64, d)
	dxf := make([]float64, d)
	matmulT64(dxf, dLogits, m.classifier, 1, m.Vocab, d)
	rmsnormBack64(dx, t.xOut, m.normOut, float64(m.NormEps), dxf)
	scale := math.Sqrt(float64(hd))
	per := m.Heads / m.KVHeads
	for l := m.Layers - 1; l >= 0; l-- {
		gl := &t.layers[l]
		w := &m.layers[l]
		m.ffnBack64(l, &gl.ffn, dx)
		dz[l] = make([][]float64, m.KVHeads)
		for g, rs := range gl.rows {
			dz[l][g] = make([]float64, len(rs.Z))
		}
		dout := make([]float64, d)
		matmulT64(dout, dx, w.wo, 1, d, d)
		dq, dk, dv := make([]float64, d), make([]float64, kvd), make([]float64, kvd)
		for h := range m.Heads {
			g := h / per
			rs := gl.rows[g]
			a, free := gl.att[h], gl.free[h]
			n := len(a) - 1
			do := dout[h*hd : (h+1)*hd]
			da := make([]float64, n+1)
			var s float64
			for r := range n {
				var acc float64
				for j, v := range rs.V[r*hd : (r+1)*hd] {
					acc += do[j] * float64(v)
				}
				da[r] = acc
				s += a[r] * acc
			}
			da[n] = dot64(do, gl.v[g*hd:(g+1)*hd])
			s += a[n] * da[n]
			q := gl.q[h*hd : (h+1)*hd]
			dqh := dq[h*hd : (h+1)*hd]
			for r := range n {
				if i := rs.Gate[r]; i >= 0 {
					dz[l][g][i] += free[r] * (da[r] - s)
				}
				if ds := a[r] * (da[r] - s) / scale; ds != 0 {
					for j, v := range rs.K[r*hd : (r+1)*hd] {
						dqh[j] += ds * float64(v)
					}
				}
			}
			ds := a[n] * (da[n] - s) / scale
			axpy64(dqh, ds, gl.k[g*hd:(g+1)*hd])
			axpy64(dk[g*hd:(g+1)*hd], ds, q)
			axpy64(dv[g*hd:(g+1)*hd], a[n], do)
		}
		for h := range m.Heads {
			m.rope64(dq[h*hd:(h+1)*hd], t.pos, true, true)
		}
		for g := range m.KVHeads {
			m.rope64(dk[g*hd:(g+1)*hd], t.pos, true, true)
		}
		dxn := make([]float64, d)
		matmulT64(dxn, dq, w.wq, 1, d, d)
		matmulT64(dxn, dk, w.wk, 1, kvd, d)
		matmulT64(dxn, dv, w.wv, 1, kvd, d)
		m.normBack(dx, gl.xIn, w.attnNorm, dxn)
	}
	return dz
}

// DistillGrad is KL(p || softmax(logits)) and its gradient with respect
// to the logits, softmax(logits) - p (p a distribution over the vocab).
func DistillGrad(logits, p []float64) (float64, []float64) {
	loss, dz := distill([][]float64{logits}, [][]float64{p})
	return loss, dz[0]
}
