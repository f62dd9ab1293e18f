package llama

import (
	"math"

	"github.com/kvstore/kvstore/format"
)

// The float64 path: the forward pass again, in float64, keeping what its
// backward pass needs (a tape), and that backward pass written by hand. It
// serves training (AdapterGrad): the gradient of a loss with respect to
// input embeddings, the weights frozen. Its forward is Forward's math in
// float64 (a test holds the two within float32 rounding), token-major
// throughout: keys and values are [rows][KVDim].

// kv64 is one layer's keys (post-RoPE) and values, [rows][KVDim].
type kv64 struct{ k, v []float64 }

// layerTape is what layer l's backward pass reads.
type layerTape struct {
	xIn, xn    []float64 // residual entering the layer, its attention RMSNorm
	q, k, v    []float64 // post-RoPE queries [n][Dim], own keys and values [n][KVDim]
	att        []float64 // [Heads][n][past+n]: softmax weights, 0 after the query
	out        []float64 // attention output before Wo, [n][Dim]
	xMid, xn2  []float64 // residual after attention, its FFN RMSNorm
	h1, h3     []float64 // [n][Hidden]
	prefixKeys kv64      // the rows attended to before the chunk's own
}

// tape64 is a float64 forward pass over one chunk of inputs.
type tape64 struct {
	pos    []int64
	layers []layerTape
	kv     []kv64    // the chunk's own keys and values, per layer
	xOut   []float64 // final residual [n][Dim]
	rows   []int     // rows whose logits were computed
	logits [][]float64
}

// forward64 runs x0 ([n][Dim] input embeddings) at positions pos over the
// prefix rows (per layer; nil for none) and computes the logits of rows.
func (m *Model) forward64(x0 []float64, pos []int64, prefix []kv64, rows []int) *tape64 {
	d := m.Dim
	t := &tape64{pos: pos, layers: make([]layerTape, m.Layers), kv: make([]kv64, m.Layers), rows: rows}
	x := append([]float64(nil), x0...)
	for l := range m.layers {
		var pre kv64
		if prefix != nil {
			pre = prefix[l]
		}
		x = m.attention64(l, x, pos, pre, &t.layers[l], &t.kv[l])
		x = m.ffn64(l, x, &t.layers[l])
	}
	t.xOut = x
	xb := make([]float64, d)
	for _, r := range rows {
		rmsnorm64(xb, x[r*d:(r+1)*d], m.normOut, float64(m.NormEps))
		z := make([]float64, m.Vocab)
		matmul64(z, xb, m.classifier, 1, d, m.Vocab)
		t.logits = append(t.logits, z)
	}
	return t
}

func (m *Model) attention64(l int, x []float64, pos []int64, pre kv64, lt *layerTape, own *kv64) []float64 {
	w := &m.layers[l]
	n, d, hd, kvd := len(pos), m.Dim, m.HeadDim(), m.KVDim()
	lt.xIn, lt.prefixKeys = x, pre
	lt.xn = make([]float64, n*d)
	for i := range n {
		rmsnorm64(lt.xn[i*d:(i+1)*d], x[i*d:(i+1)*d], w.attnNorm, float64(m.NormEps))
	}
	lt.q, lt.k, lt.v = make([]float64, n*d), make([]float64, n*kvd), make([]float64, n*kvd)
	matmul64(lt.q, lt.xn, w.wq, n, d, d)
	matmul64(lt.k, lt.xn, w.wk, n, d, kvd)
	matmul64(lt.v, lt.xn, w.wv, n, d, kvd)
	for i, p := range pos {
		for h := range m.Heads {
			m.rope64(lt.q[i*d+h*hd:i*d+(h+1)*hd], p, true, false)
		}
		for g := range m.KVHeads {
			m.rope64(lt.k[i*kvd+g*hd:i*kvd+(g+1)*hd], p, true, false)
		}
	}
	own.k, own.v = lt.k, lt.v
	past := len(pre.k) / kvd
	total := past + n
	keys, vals := concat64(pre.k, lt.k), concat64(pre.v, lt.v)
	lt.att = make([]float64, m.Heads*n*total)
	lt.out = make([]float64, n*d)
	scale := math.Sqrt(float64(hd))
	for h := range m.Heads {
		g := h / (m.Heads / m.KVHeads)
		for i := range n {
			q := lt.q[i*d+h*hd : i*d+(h+1)*hd]
			a := lt.att[(h*n+i)*total : (h*n+i)*total+past+i+1]
			for r := range a {
				a[r] = dot64(q, keys[r*kvd+g*hd:r*kvd+(g+1)*hd]) / scale
			}
			softmax64(a)
			o := lt.out[i*d+h*hd : i*d+(h+1)*hd]
			for r, p := range a {
				axpy64(o, p, vals[r*kvd+g*hd:r*kvd+(g+1)*hd])
			}
		}
	}
	xo := make([]float64, n*d)
	matmul64(xo, lt.out, w.wo, n, d, d)
	for i := range xo {
		xo[i] += x[i]
	}
	return xo
}

func (m *Model) ffn64(l int, x []float64, lt *layerTape) []float64 {
	w := &m.layers[l]
	d, hid := m.Dim, m.Hidden
	n := len(x) / d
	lt.xMid = x
	lt.xn2 = make([]float64, n*d)
	for i := range n {
		rmsnorm64(lt.xn2[i*d:(i+1)*d], x[i*d:(i+1)*d], w.ffnNorm, float64(m.NormEps))
	}
	lt.h1, lt.h3 = make([]float64, n*hid), make([]float64, n*hid)
	matmul64(lt.h1, lt.xn2, w.w1, n, d, hid)
	matmul64(lt.h3, lt.xn2, w.w3, n, d, hid)
	g := make([]float64, n*hid)
	for i, a := range lt.h1 {
		g[i] = silu(a) * lt.h3[i]
	}
	xo := make([]float64, n*d)
	matmul64(xo, g, w.w2, n, hid, d)
	for i := range xo {
		xo[i] += x[i]
	}
	return xo
}

// backward64 is the backward pass of t: given the gradients of the loss
// with respect to the computed logits (dz, one per t.rows entry) and to the
// chunk's own keys and values (dOwn, per layer; nil entries or nil for
// none), it returns the gradient with respect to the input embeddings and
// adds the gradient with respect to the prefix rows to dPrefix (per layer,
// shaped like the prefix; nil when there is none).
func (m *Model) backward64(t *tape64, dz [][]float64, dOwn []kv64, dPrefix []kv64) []float64 {
	n, d := len(t.pos), m.Dim
	dx := make([]float64, n*d)
	dxf, dxb := make([]float64, d), make([]float64, d)
	for j, r := range t.rows {
		clear(dxf)
		matmulT64(dxf, dz[j], m.classifier, 1, m.Vocab, d)
		rmsnormBack64(dxb, t.xOut[r*d:(r+1)*d], m.normOut, float64(m.NormEps), dxf)
		axpy64(dx[r*d:(r+1)*d], 1, dxb)
	}
	for l := m.Layers - 1; l >= 0; l-- {
		lt := &t.layers[l]
		m.ffnBack64(l, lt, dx)
		var own, pre *kv64
		if dOwn != nil {
			own = &dOwn[l]
		}
		if dPrefix != nil {
			pre = &dPrefix[l]
		}
		m.attentionBack64(l, lt, t.pos, dx, own, pre)
	}
	return dx
}

// ffnBack64 turns dx, the gradient at the FFN block's output, into the
// gradient at its input (the residual after attention), in place.
func (m *Model) ffnBack64(l int, lt *layerTape, dx []float64) {
	w := &m.layers[l]
	d, hid := m.Dim, m.Hidden
	n := len(dx) / d
	dg := make([]float64, n*hid)
	matmulT64(dg, dx, w.w2, n, d, hid)
	dh1, dh3 := make([]float64, n*hid), make([]float64, n*hid)
	for i, a := range lt.h1 {
		dh1[i] = dg[i] * lt.h3[i] * siluGrad(a)
		dh3[i] = dg[i] * silu(a)
	}
	dxn := make([]float64, n*d)
	matmulT64(dxn, dh1, w.w1, n, hid, d)
	matmulT64(dxn, dh3, w.w3, n, hid, d)
	m.normBack(dx, lt.xMid, w.ffnNorm, dxn)
}

// normBack adds the gradient through the RMSNorm of each row of x (gain g)
// given dy at its output to dx.
func (m *Model) normBack(dx, x []float64, g []float32, dy []float64) {
	d := m.Dim
	buf := make([]float64, d)
	for i := range len(x) / d {
		rmsnormBack64(buf, x[i*d:(i+1)*d], g, float64(m.NormEps), dy[i*d:(i+1)*d])
		axpy64(dx[i*d:(i+1)*d], 1, buf)
	}
}

// attentionBack64 turns dx, the gradient at the attention block's output,
// into the gradient at its input, in place; it adds the gradients of the
// prefix rows to pre and reads those of the chunk's own keys and values
// from later chunks in own (either may be nil).
func (m *Model) attentionBack64(l int, lt *layerTape, pos []int64, dx []float64, own, pre *kv64) {
	w := &m.layers[l]
	n, d, hd, kvd := len(pos), m.Dim, m.HeadDim(), m.KVDim()
	past := len(lt.prefixKeys.k) / kvd
	total := past + n
	dout := make([]float64, n*d)
	matmulT64(dout, dx, w.wo, n, d, d)
	keys, vals := concat64(lt.prefixKeys.k, lt.k), concat64(lt.prefixKeys.v, lt.v)
	dk, dv := make([]float64, total*kvd), make([]float64, total*kvd)
	dq := make([]float64, n*d)
	scale := math.Sqrt(float64(hd))
	da := make([]float64, total)
	for h := range m.Heads {
		g := h / (m.Heads / m.KVHeads)
		for i := range n {
			a := lt.att[(h*n+i)*total : (h*n+i)*total+past+i+1]
			do := dout[i*d+h*hd : i*d+(h+1)*hd]
			q := lt.q[i*d+h*hd : i*d+(h+1)*hd]
			var s float64
			for r, p := range a {
				da[r] = dot64(do, vals[r*kvd+g*hd:r*kvd+(g+1)*hd])
				s += p * da[r]
				axpy64(dv[r*kvd+g*hd:r*kvd+(g+1)*hd], p, do)
			}
			dqi := dq[i*d+h*hd : i*d+(h+1)*hd]
			for r, p := range a {
				ds := p * (da[r] - s) / scale
				axpy64(dqi, ds, keys[r*kvd+g*hd:r*kvd+(g+1)*hd])
				axpy64(dk[r*kvd+g*hd:r*kvd+(g+1)*hd], ds, q)
			}
		}
	}
	if pre != nil && past > 0 {
		axpy64(pre.k, 1, dk[:past*kvd])
		axpy64(pre.v, 1, dv[:past*kvd])
	}
	dk, dv = dk[past*kvd:], dv[past*kvd:]
	if own != nil && own.k != nil {
		axpy64(dk, 1, own.k)
		axpy64(dv, 1, own.v)
	}
	for i, p := range pos {
		for h := range m.Heads {
			m.rope64(dq[i*d+h*hd:i*d+(h+1)*hd], p, true, true)
		}
		for g := range m.KVHeads {
			m.rope64(dk[i*kvd+g*hd:i*kvd+(g+1)*hd], p, true, true)
		}
	}
	dxn := make([]float64, n*d)
	matmulT64(dxn, dq, w.wq, n, d, d)
	matmulT64(dxn, dk, w.wk, n, kvd, d)
	matmulT64(dxn, dv, w.wv, n, kvd, d)
	m.normBack(dx, lt.xIn, w.attnNorm, dxn)
}

// rope64 rotates one head vector in float64 by the angles of pos: the
// model's RoPE (with AttentionScale when apply), or its transpose (the
// rotation by -pos, same scale) when transpose.
func (m *Model) rope64(x []float64, pos int64, apply, transpose bool) {
	r := m.rope
	inv := m.invFreq
	scale := 1.0
	if apply {
		scale = float64(r.AttentionScale())
	}
	half := r.Rotary() / 2
	for j, f := range inv {
		s, c := math.Sincos(float64(pos) * f)
		if transpose {
			s = -s
		}
		c, s = c*scale, s*scale
		a, b := 2*j, 2*j+1
		if r.Config().Style != format.RoPEInterleaved {
			a, b = j, j+half
		}
		x0, x1 := x[a], x[b]
		x[a], x[b] = x0*c-x1*s, x0*s+x1*c
	}
}

func concat64(a, b []float64) []float64 {
	if len(a) == 0 {
		return b
	}
	return append(append(make([]float64, 0, len(a)+len(b)), a...), b...)
}

func dot64(a, b []float64) float64 {
	var s float64
	for i, v := range a {
		s += v * b[i]
	}
	return s
}

// axpy64 adds a*x to y.
func axpy64(y []float64, a float64, x []float64) {
	for i, v := range x {
		y[i] += a * v
	}
}

func silu(a float64) float64 { return a / (1 + math.Exp(-a)) }

func siluGrad(a float64) float64 {
	s := 1 / (1 + math.Exp(-a))
	return s * (1 + a*(1-s))
}

func softmax64(x []float64) {
	mx := math.Inf(-1)
	for _, v := range x {
		mx = math.Max(mx, v)
	}
	var sum float64
	for i, v := range x {
		x[i] = math.Exp(v - mx)
		sum += x[i]
	}
	for i := range x {
		x[i] /= sum
	}
}

// rmsnorm64 sets out = w * x / sqrt(mean(x^2) + eps).
func rmsnorm64(out, x []float64, w []float32, eps float64) {
	r := 1 / math.Sqrt(dot64(x, x)/float64(len(x))+eps)
	for i, v := range x {
		out[i] = float64(w[i]) * r * v
	}
}

// rmsnormBack64 sets dx to the gradient through rmsnorm64 given dy:
// dx_j = r g_j dy_j - r^3 x_j / n * sum_i dy_i g_i x_i.
func rmsnormBack64(dx, x []float64, w []float32, eps float64, dy []float64) {
	n := float64(len(x))
	r := 1 / math.Sqrt(dot64(x, x)/n+eps)
	var s float64
	for i, v := range x {
		s += dy[i] * float64(w[i]) * v
	}
	c := r * r * r * s / n
	for j, v := range x {
		dx[j] = r*float64(w[j])*dy[j] - c*v
	}
}

// matmul64 sets out[i][o] = sum_k x[i][k] * w[o][k] for n rows of x.
func matmul64(out, x []float64, w []float32, n, in, outDim int) {
	for i := range n {
		xi := x[i*in : (i+1)*in]
		for o := range outDim {
			wo := w[o*in : (o+1)*in]
			var s float64
			for k, v := range xi {
				s += v * float64(wo[k])
			}
			out[i*outDim+o] = s
		}
	}
}

// matmulT64 adds dy · w to dx: dx[i][k] += sum_o dy[i][o] * w[o][k], the
// backward pass of matmul64 (dy is [n][outDim], dx [n][in]).
func matmulT64(dx, dy []float64, w []float32, n, outDim, in int) {
	for i := range n {
		dxi := dx[i*in : (i+1)*in]
		for o, c := range dy[i*outDim : (i+1)*outDim] {
			if c == 0 {
				continue
			}
			for k, v := range w[o*in : (o+1)*in] {
				dxi[k] += c * float64(v)
			}
		}
	}
}
