package llama

import (
	"fmt"
	"math"

	"github.com/kvstore/kvstore/format"
)

// PacketExample is one distillation example for KV Packet adapters: the
// student's side of it. After the Prefix, each document is prefilled alone from position 0
// as [header; doc; trailer]; the packets are concatenated in order, each
// one's keys re-rotated by the rows before it (as Assemble does); Query is
// prefilled after them. The loss is the mean over the last len(Teacher)
// Query rows of KL(Teacher[j] || the student's next-token distribution).
type PacketExample struct {
	// Prefix, when not empty, is prefilled first, from position 0, with no
	// adapter rows (a BOS, a system prompt): the packets follow it.
	Prefix []int
	Docs   [][]int
	Query  []int // the question, then the answer but its last token
	// Teacher[j] is the distribution the full-context model gave after the
	// same token (Vocab entries summing to 1).
	Teacher [][]float64
	// HideHeader: the header rows are prefilled but not assembled, so the
	// query never attends to them; each packet is its document's and
	// trailer's rows, re-rotated as if they started at position 0. The
	// header then shapes only the document's own KV (a BOS-like context
	// for it).
	HideHeader bool
}

// PacketLoss computes the loss of ex for the adapter header and trailer
// ([rows][Dim] each, flat; either may be empty), in float64. When gHeader
// and gTrailer are not nil (shaped like header and trailer) the gradient of
// the loss with respect to them is added to them: the weights are frozen,
// nothing else is differentiated. Errors wrap format.ErrInvalidArgument.
func (m *Model) PacketLoss(header, trailer []float64, ex *PacketExample, gHeader, gTrailer []float64) (float64, error) {
	if err := m.checkPacketExample(header, trailer, ex, gHeader, gTrailer); err != nil {
		return 0, err
	}
	d, kvd := m.Dim, m.KVDim()
	nh, nt := len(header)/d, len(trailer)/d
	hidden := 0 // header rows the query does not see
	if ex.HideHeader {
		hidden = nh
	}
	tapes := make([]*tape64, len(ex.Docs))
	offsets := make([]int64, len(ex.Docs))
	prefix := make([]kv64, m.Layers)
	var rows int64
	if len(ex.Prefix) > 0 {
		t := m.forward64(m.embed64(ex.Prefix), positions(0, len(ex.Prefix)), nil, nil)
		for l := range prefix {
			prefix[l] = kv64{k: append([]float64(nil), t.kv[l].k...), v: append([]float64(nil), t.kv[l].v...)}
		}
		rows = int64(len(ex.Prefix))
	}
	for p, doc := range ex.Docs {
		x0 := append(append(append([]float64(nil), header...), m.embed64(doc)...), trailer...)
		n := nh + len(doc) + nt
		tapes[p] = m.forward64(x0, positions(0, n), nil, nil)
		offsets[p] = rows
		lo := hidden * kvd
		for l := range prefix {
			k := append([]float64(nil), tapes[p].kv[l].k[lo:]...)
			m.rotateRows(k, rows-int64(hidden), false)
			prefix[l].k = append(prefix[l].k, k...)
			prefix[l].v = append(prefix[l].v, tapes[p].kv[l].v[lo:]...)
		}
		rows += int64(n - hidden)
	}
	first := len(ex.Query) - len(ex.Teacher)
	student := m.forward64(m.embed64(ex.Query), positions(rows, len(ex.Query)), prefix, positionsInt(first, len(ex.Teacher)))
	loss, dz := distill(student.logits, ex.Teacher)
	if gHeader == nil {
		return loss, nil
	}
	dPrefix := make([]kv64, m.Layers)
	for l := range dPrefix {
		dPrefix[l] = kv64{k: make([]float64, len(prefix[l].k)), v: make([]float64, len(prefix[l].v))}
	}
	m.backward64(student, dz, nil, dPrefix)
	for p, t := range tapes {
		n := len(t.pos)
		lo, hi := int(offsets[p])*kvd, (int(offsets[p])+n-hidden)*kvd
		dOwn := make([]kv64, m.Layers)
		for l := range dOwn {
			// The hidden header rows reach the loss only through the
			// later rows of their packet: their own KV gradient is 0.
			dk := append(make([]float64, hidden*kvd), dPrefix[l].k[lo:hi]...)
			m.rotateRows(dk[hidden*kvd:], offsets[p]-int64(hidden), true)
			dOwn[l] = kv64{k: dk, v: append(make([]float64, hidden*kvd), dPrefix[l].v[lo:hi]...)}
		}
		dx := m.backward64(t, nil, dOwn, nil)
		axpy64(gHeader, 1, dx[:nh*d])
		axpy64(gTrailer, 1, dx[(n-nt)*d:])
	}
	return loss, nil
}

// embed64 is the input embeddings of tokens in float64, [n][Dim] flat.
func (m *Model) embed64(tokens []int) []float64 {
	d := m.Dim
	x := make([]float64, 0, len(tokens)*d)
	for _, t := range tokens {
		for _, v := range m.embed[t*d : (t+1)*d] {
			x = append(x, float64(v))
		}
	}
	return x
}

// distill is the mean of KL(p_j || softmax(z_j)) and its gradient with
// respect to each z_j: (softmax(z_j) - p_j) / count.
func distill(z [][]float64, p [][]float64) (float64, [][]float64) {
	var loss float64
	dz := make([][]float64, len(z))
	inv := 1 / float64(len(z))
	for j, zj := range z {
		mx := math.Inf(-1)
		for _, v := range zj {
			mx = math.Max(mx, v)
		}
		var sum float64
		for _, v := range zj {
			sum += math.Exp(v - mx)
		}
		lse := mx + math.Log(sum)
		dz[j] = make([]float64, len(zj))
		for i, v := range zj {
			lq := v - lse
			if p[j][i] > 0 {
				loss += inv * p[j][i] * (math.Log(p[j][i]) - lq)
			}
			dz[j][i] = inv * (math.Exp(lq) - p[j][i])
		}
	}
	return loss, dz
}

// rotateRows rotates every KV head of the token-major keys k ([rows][KVDim])
// by delta positions (the transpose: by -delta), as reconstruct.Shift does
// to a packet's keys at assembly.
func (m *Model) rotateRows(k []float64, delta int64, transpose bool) {
	if delta == 0 {
		return
	}
	hd := m.HeadDim()
	for i := 0; i < len(k); i += hd {
		m.rope64(k[i:i+hd], delta, false, transpose)
	}
}

func positions(start int64, n int) []int64 {
	p := make([]int64, n)
	for i := range p {
		p[i] = start + int64(i)
	}
	return p
}

func positionsInt(start, n int) []int {
	p := make([]int, n)
	for i := range p {
		p[i] = start + i
	}
	return p
}

func (m *Model) checkPacketExample(header, trailer []float64, ex *PacketExample, gHeader, gTrailer []float64) error {
	bad := func(f string, args ...any) error {
		return fmt.Errorf("%w: llama: packet loss: %s", format.ErrInvalidArgument, fmt.Sprintf(f, args...))
	}
	d := m.Dim
	switch {
	case len(header)%d != 0 || len(trailer)%d != 0:
		return bad("header of %d and trailer of %d values, not rows of %d", len(header), len(trailer), d)
	case (gHeader == nil) != (gTrailer == nil) || (gHeader != nil && (len(gHeader) != len(header) || len(gTrailer) != len(trailer))):
		return bad("gradients of %d and %d values for a header of %d and a trailer of %d", len(gHeader), len(gTrailer), len(header), len(trailer))
	case len(ex.Teacher) == 0 || len(ex.Teacher) > len(ex.Query):
		return bad("%d teacher rows for %d query tokens", len(ex.Teacher), len(ex.Query))
	}
	for _, x := range [][]float64{header, trailer} {
		for _, v := range x {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return bad("adapter value %v", v)
			}
		}
	}
	for i, doc := range append(append([][]int{ex.Prefix}, ex.Docs...), ex.Query) {
		for _, t := range doc {
			if t < 0 || t >= m.Vocab {
				return bad("token %d (sequence %d) outside vocab [0, %d)", t, i, m.Vocab)
			}
		}
	}
	for j, p := range ex.Teacher {
		if len(p) != m.Vocab {
			return bad("teacher row %d has %d entries, vocab is %d", j, len(p), m.Vocab)
		}
	}
	return nil
}
