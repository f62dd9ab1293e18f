//go:build (linux || darwin) && (amd64 || arm64)

package llamacpp

import (
	"fmt"
	"math"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/reconstruct"
	"github.com/kvstore/kvstore/store"
)

// A llama.cpp cell holds one position for every layer and KV head, so a
// sequence holds one set of context tokens for the whole model: span
// memory served to llama.cpp chooses its spans once per request, for all
// (layer, KV head) groups together (RequestSpans), and loads the resident
// rows and the chosen spans' reconstructed rows at their original
// positions (SpanRows, LoadRows). Every cell is one row of every
// (layer, KV head): a budget of B rows per (layer, KV head) is B cells.

// RequestSpans chooses the spans of one request from per-group queries:
// each group g (layer*KVHeads + head, queries[g] the pre-RoPE query
// vectors of its query heads, any number of tokens; empty: not routed)
// scores every span with rt.Score at position pos (where the request's
// decoding begins: the context's length, for the routers' recency term); a span's request score is its best
// score over the groups where it passes that group's threshold rt.Tau[g];
// spans are taken in descending request score (ties to the lower index)
// while their rt.SpanTokens fit in tokens, skipping one that does not fit
// and going on (reconstruct.Budget.Fill). The result is ascending.
func RequestSpans(rt *store.Routing, pos int64, queries [][]float32, tokens int64) ([]int, error) {
	if len(queries) != len(rt.Routers) || len(rt.Tau) != len(rt.Routers) {
		return nil, fmt.Errorf("%w: request spans: queries for %d groups, %d thresholds, the routing has %d", ErrInvalidArgument, len(queries), len(rt.Tau), len(rt.Routers))
	}
	best := make([]float32, rt.Spans)
	for s := range best {
		best[s] = float32(math.NaN())
	}
	var sc []float32
	for g, q := range queries {
		if len(q) == 0 {
			continue
		}
		var err error
		if sc, err = rt.Score(g, pos, q, sc); err != nil {
			return nil, fmt.Errorf("llamacpp: request spans: group %d: %w", g, err)
		}
		for s, a := range sc {
			if a > rt.Tau[g] && !(a <= best[s]) { // NaN best: unset
				best[s] = a
			}
		}
	}
	if tokens <= 0 {
		return nil, nil
	}
	z, err := reconstruct.Select([][]float32{best}, []float32{float32(math.Inf(-1))}, rt.SpanTokens, nil,
		reconstruct.Budget{Tokens: tokens, Fill: true})
	if err != nil {
		return nil, fmt.Errorf("llamacpp: request spans: %w", err)
	}
	return z.Spans[0], nil
}

// SpanRows rebuilds rows of a stored span memory at their original
// positions (Meta().BasePosition + t for context token t): tokens with
// resident[t] from the stored resident rows (keys rotated from their local
// position t to the base), tokens with reconstructed[t] from their span's
// factors (ReconstructSpan: keys RoPE'd at their own positions), one span
// reconstructed once per (layer, KV head) for all its tokens asked for.
// Both slices are Meta().Tokens long; a token marked resident must be in
// Meta().Resident, one marked reconstructed in a factored span, and no
// token both. Rows are in ascending position.
func SpanRows(r *store.SpanReader, resident, reconstructed []bool) (*Rows, error) {
	meta := r.Meta()
	n, L, H, D := meta.Tokens, meta.Layers, meta.KVHeads, meta.HeadDim
	if len(resident) != n || len(reconstructed) != n {
		return nil, fmt.Errorf("%w: span rows: %d and %d marks for %d tokens", ErrInvalidArgument, len(resident), len(reconstructed), n)
	}
	resIdx := make([]int, n) // index into meta.Resident, or -1
	for t := range resIdx {
		resIdx[t] = -1
	}
	for i, t := range meta.Resident {
		resIdx[t] = i
	}
	type pick struct {
		t, span int // span: -1 for a resident row
	}
	var picks []pick
	sp := 0
	for t := range n {
		for sp < len(meta.Spans) && meta.Spans[sp].End <= t {
			sp++
		}
		switch {
		case resident[t] && reconstructed[t]:
			return nil, fmt.Errorf("%w: span rows: token %d marked resident and reconstructed", ErrInvalidArgument, t)
		case resident[t]:
			if resIdx[t] < 0 {
				return nil, fmt.Errorf("%w: span rows: token %d is not resident", ErrInvalidArgument, t)
			}
			picks = append(picks, pick{t, -1})
		case reconstructed[t]:
			if sp >= len(meta.Spans) || meta.Spans[sp].Start > t || !meta.Spans[sp].Factored {
				return nil, fmt.Errorf("%w: span rows: token %d is in no factored span", ErrInvalidArgument, t)
			}
			picks = append(picks, pick{t, sp})
		}
	}
	m := len(picks)
	if m == 0 {
		return nil, fmt.Errorf("%w: span rows: no token marked", ErrInvalidArgument)
	}
	base := meta.BasePosition
	if base < 0 || base+int64(n) > math.MaxInt32 {
		return nil, fmt.Errorf("%w: span rows: base position %d", ErrInvalidArgument, base)
	}
	rows := &Rows{Positions: make([]int32, m), K: make([][]float32, L), V: make([][]float32, L)}
	for i, p := range picks {
		rows.Positions[i] = int32(base + int64(p.t))
	}
	nr := len(meta.Resident)
	rope := r.RoPE()
	var kspan, vspan []float32
	for l := range L {
		kb, vb, err := r.Resident(l)
		if err != nil {
			return nil, fmt.Errorf("llamacpp: span rows: layer %d: %w", l, err)
		}
		resK, resV := make([]float32, len(kb)/meta.ResidentDType.Size()), make([]float32, len(vb)/meta.ResidentDType.Size())
		if err := format.ToF32(resK, kb, meta.ResidentDType); err != nil {
			return nil, err
		}
		if err := format.ToF32(resV, vb, meta.ResidentDType); err != nil {
			return nil, err
		}
		k, v := make([]float32, H*m*D), make([]float32, H*m*D)
		for h := range H {
			done := -1 // the span held in kspan, vspan
			for i, p := range picks {
				dk, dv := k[(h*m+i)*D:(h*m+i+1)*D], v[(h*m+i)*D:(h*m+i+1)*D]
				if p.span < 0 {
					j := resIdx[p.t]
					copy(dk, resK[(h*nr+j)*D:(h*nr+j+1)*D])
					copy(dv, resV[(h*nr+j)*D:(h*nr+j+1)*D])
					if base != 0 {
						rope.Apply(dk, base)
					}
					continue
				}
				s := meta.Spans[p.span]
				if done != p.span {
					kspan, vspan = growF32(kspan, s.Len()*D), growF32(vspan, s.Len()*D)
					if err := r.ReconstructSpan(l, h, p.span, base, kspan, vspan); err != nil {
						return nil, fmt.Errorf("llamacpp: span rows: layer %d head %d span %d: %w", l, h, p.span, err)
					}
					done = p.span
				}
				o := (p.t - s.Start) * D
				copy(dk, kspan[o:o+D])
				copy(dv, vspan[o:o+D])
			}
		}
		rows.K[l], rows.V[l] = k, v
	}
	return rows, nil
}

// growF32 is x resized to n floats, reallocated when too small.
func growF32(x []float32, n int) []float32 {
	if cap(x) < n {
		return make([]float32, n)
	}
	return x[:n]
}

// GroupSpans chooses the spans of one request per (layer, KV head) group:
// group g's spans (pos and queries[g] as RequestSpans takes them; empty: none) in
// descending score above rt.Tau[g] while their rt.SpanTokens fit in
// tokens, skipping one that does not fit (reconstruct.Select with
// Budget.Fill). Each result is ascending.
func GroupSpans(rt *store.Routing, pos int64, queries [][]float32, tokens int64) ([][]int, error) {
	if len(queries) != len(rt.Routers) || len(rt.Tau) != len(rt.Routers) {
		return nil, fmt.Errorf("%w: group spans: queries for %d groups, %d thresholds, the routing has %d", ErrInvalidArgument, len(queries), len(rt.Tau), len(rt.Routers))
	}
	out := make([][]int, len(queries))
	if tokens <= 0 {
		return out, nil
	}
	for g, q := range queries {
		if len(q) == 0 {
			continue
		}
		sc, err := rt.Score(g, pos, q, nil)
		if err != nil {
			return nil, fmt.Errorf("llamacpp: group spans: group %d: %w", g, err)
		}
		z, err := reconstruct.Select([][]float32{sc}, rt.Tau[g:g+1], rt.SpanTokens, nil, reconstruct.Budget{Tokens: tokens, Fill: true})
		if err != nil {
			return nil, fmt.Errorf("llamacpp: group spans: group %d: %w", g, err)
		}
		out[g] = z.Spans[0]
	}
	return out, nil
}

// SpanGroupRows rebuilds a different row set per (layer, KV head) group
// (layer*KVHeads + head) of a stored span memory: tokens[g] are group g's
// context tokens, ascending, every group the same count C; a token with
// resident[t] comes from the stored resident rows, any other from its
// span's factors, keys rotated for the token's own position
// (Meta().BasePosition + t).
//
// A llama.cpp cell holds one position for all layers and heads, but its
// attention reads a cell's position only to mask it (keys are stored
// rotated): cell i of the result holds, in each group, that group's i-th
// token, and its position is a label, BasePosition + Tokens - C + i, below
// the next token's and ending at the context's last position, where
// llama.cpp decodes on. Such a sequence is for decoding on from
// BasePosition + Tokens only: its positions do not say which token a cell
// holds (do not Shift, Remove by position or Save it).
func SpanGroupRows(r *store.SpanReader, tokens [][]int, resident []bool) (*Rows, error) {
	meta := r.Meta()
	n, L, H, D := meta.Tokens, meta.Layers, meta.KVHeads, meta.HeadDim
	if len(tokens) != L*H || len(resident) != n {
		return nil, fmt.Errorf("%w: span group rows: %d groups and %d marks, the memory has %d groups and %d tokens", ErrInvalidArgument, len(tokens), len(resident), L*H, n)
	}
	c := len(tokens[0])
	if c == 0 || c > n {
		return nil, fmt.Errorf("%w: span group rows: %d rows per group of %d tokens", ErrInvalidArgument, c, n)
	}
	resIdx := make([]int, n)
	for t := range resIdx {
		resIdx[t] = -1
	}
	for i, t := range meta.Resident {
		resIdx[t] = i
	}
	spanOf := make([]int, n)
	for s, info := range meta.Spans {
		for t := info.Start; t < info.End && t < n; t++ {
			spanOf[t] = s
		}
	}
	for g, ts := range tokens {
		if len(ts) != c {
			return nil, fmt.Errorf("%w: span group rows: group %d has %d rows, group 0 %d", ErrInvalidArgument, g, len(ts), c)
		}
		for i, t := range ts {
			switch {
			case t < 0 || t >= n || (i > 0 && t <= ts[i-1]):
				return nil, fmt.Errorf("%w: span group rows: group %d: token %d out of range or order", ErrInvalidArgument, g, t)
			case resident[t] && resIdx[t] < 0:
				return nil, fmt.Errorf("%w: span group rows: token %d is not resident", ErrInvalidArgument, t)
			case !resident[t] && !meta.Spans[spanOf[t]].Factored:
				return nil, fmt.Errorf("%w: span group rows: token %d is in no factored span", ErrInvalidArgument, t)
			}
		}
	}
	base := meta.BasePosition
	if base < 0 || base+int64(n) > math.MaxInt32 {
		return nil, fmt.Errorf("%w: span group rows: base position %d", ErrInvalidArgument, base)
	}
	rows := &Rows{Positions: make([]int32, c), K: make([][]float32, L), V: make([][]float32, L)}
	for i := range rows.Positions {
		rows.Positions[i] = int32(base + int64(n-c+i))
	}
	nr := len(meta.Resident)
	rope := r.RoPE()
	var kspan, vspan []float32
	for l := range L {
		kb, vb, err := r.Resident(l)
		if err != nil {
			return nil, fmt.Errorf("llamacpp: span group rows: layer %d: %w", l, err)
		}
		es := meta.ResidentDType.Size()
		resK, resV := make([]float32, len(kb)/es), make([]float32, len(vb)/es)
		if err := format.ToF32(resK, kb, meta.ResidentDType); err != nil {
			return nil, err
		}
		if err := format.ToF32(resV, vb, meta.ResidentDType); err != nil {
			return nil, err
		}
		k, v := make([]float32, H*c*D), make([]float32, H*c*D)
		for h := range H {
			done := -1
			for i, t := range tokens[l*H+h] {
				dk, dv := k[(h*c+i)*D:(h*c+i+1)*D], v[(h*c+i)*D:(h*c+i+1)*D]
				if resident[t] {
					j := resIdx[t]
					copy(dk, resK[(h*nr+j)*D:(h*nr+j+1)*D])
					copy(dv, resV[(h*nr+j)*D:(h*nr+j+1)*D])
					if base != 0 {
						rope.Apply(dk, base)
					}
					continue
				}
				sp := spanOf[t]
				s := meta.Spans[sp]
				if done != sp {
					kspan, vspan = growF32(kspan, s.Len()*D), growF32(vspan, s.Len()*D)
					if err := r.ReconstructSpan(l, h, sp, base, kspan, vspan); err != nil {
						return nil, fmt.Errorf("llamacpp: span group rows: layer %d head %d span %d: %w", l, h, sp, err)
					}
					done = sp
				}
				o := (t - s.Start) * D
				copy(dk, kspan[o:o+D])
				copy(dv, vspan[o:o+D])
			}
		}
		rows.K[l], rows.V[l] = k, v
	}
	return rows, nil
}
