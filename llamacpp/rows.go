//go:build (linux || darwin) && (amd64 || arm64)

package llamacpp

import (
	"fmt"
	"math"

	"github.com/kvstore/kvstore/format"
)

// Rows are KV rows at arbitrary positions: what LoadRows places in a
// sequence and ReadRows reads back from one. Row i of every layer and KV
// head is one llama.cpp cell, at Positions[i].
type Rows struct {
	// Positions are the rows' positions, strictly ascending; gaps are
	// allowed (positions absent from the sequence).
	Positions []int32
	// K and V hold per layer [KVHeads][len(Positions)][HeadDim] float32,
	// a packet's layout; keys post-RoPE, row i rotated for Positions[i]
	// (what the model attends with).
	K, V [][]float32
}

// Len is the number of rows.
func (r *Rows) Len() int { return len(r.Positions) }

// check validates r against a model of layers x kvHeads x headDim.
func (r *Rows) check(layers, kvHeads, headDim int) error {
	n := len(r.Positions)
	if n == 0 {
		return fmt.Errorf("%w: no rows", ErrInvalidArgument)
	}
	for i, p := range r.Positions {
		if p < 0 || p > math.MaxInt32-1 || (i > 0 && p <= r.Positions[i-1]) {
			return fmt.Errorf("%w: row %d at position %d: positions must be non-negative and strictly ascending", ErrInvalidArgument, i, p)
		}
	}
	if len(r.K) != layers || len(r.V) != layers {
		return fmt.Errorf("%w: rows of %d and %d layers, the model has %d", ErrInvalidArgument, len(r.K), len(r.V), layers)
	}
	want := kvHeads * n * headDim
	for l := range layers {
		if len(r.K[l]) != want || len(r.V[l]) != want {
			return fmt.Errorf("%w: layer %d: %d keys and %d values, want %d (%d heads x %d rows x %d)",
				ErrInvalidArgument, l, len(r.K[l]), len(r.V[l]), want, kvHeads, n, headDim)
		}
	}
	return nil
}

// LoadRows makes sequence seq of lc hold exactly rows: one cell per row at
// its position, its keys and values those given (rounded to the cache's
// element type). Decoding then continues at any position after the last
// row; positions not among rows are absent, attended by no later token.
// llama.cpp requires the first token decoded next to sit at the last
// row's position + 1 (llama_batch_allocr: "sequence positions remain
// consecutive"), so a caller continuing at position n loads a row at
// n-1. Nothing is rotated: the keys must already be rotated for their
// positions. On failure the sequence is left empty.
func LoadRows(lc *Context, seq int, rows *Rows) error {
	if !lc.seqOK(seq) {
		return lc.badSeq("load rows", seq)
	}
	lc.Remove(seq, -1, -1)
	if err := loadRows(lc, seq, rows); err != nil {
		lc.Remove(seq, -1, -1)
		return fmt.Errorf("llamacpp: load rows into sequence %d: %w", seq, err)
	}
	delete(lc.shifted, seq)
	return nil
}

func loadRows(lc *Context, seq int, rows *Rows) error {
	m := lc.m
	H, D := m.KVHeads, m.HeadDim()
	if err := rows.check(m.Layers, H, D); err != nil {
		return err
	}
	n := rows.Len()
	if n > lc.Cells() {
		return fmt.Errorf("%w: %d rows do not fit a context of %d cells", ErrInvalidArgument, n, lc.Cells())
	}
	vTrans := !lc.opts.FlashAttn
	typ := lc.opts.Cache.ggml()
	buf, lay, err := buildState(lc.scratch, int32(seq), 1, rows.Positions, m.Layers, H*D, typ, vTrans)
	if err != nil {
		return err
	}
	lc.scratch = buf
	dt := lc.opts.Cache.DType()
	es := lay.esize
	per := n * H * D * es
	tmp := make([]byte, per)
	for l := range m.Layers {
		// The state's K rows are token-major [n][H][D]; a packet's
		// head-major [H][n][D].
		if err := format.FromF32(tmp, rows.K[l], dt); err != nil {
			return err
		}
		k := buf[lay.k[l] : lay.k[l]+per]
		for h := range H {
			for t := range n {
				copy(k[(t*H+h)*D*es:(t*H+h+1)*D*es], tmp[(h*n+t)*D*es:])
			}
		}
		if err := format.FromF32(tmp, rows.V[l], dt); err != nil {
			return err
		}
		v := buf[lay.v[l] : lay.v[l]+per]
		for h := range H {
			for t := range n {
				src := tmp[(h*n+t)*D*es : (h*n+t+1)*D*es]
				if !vTrans {
					copy(v[(t*H+h)*D*es:], src)
					continue
				}
				// Transposed V: [H*D][n].
				for d := range D {
					copy(v[((h*D+d)*n+t)*es:((h*D+d)*n+t+1)*es], src[d*es:(d+1)*es])
				}
			}
		}
	}
	return lc.SetState(seq, buf)
}

// ReadRows reads sequence seq's cells back as Rows, in float32: positions
// as the cells hold them (any gaps included), keys as rotated in the
// cache. A sequence shifted since its last Decode is refused (ErrState):
// its keys are stale.
func ReadRows(lc *Context, seq int) (*Rows, error) {
	if !lc.seqOK(seq) {
		return nil, lc.badSeq("read rows", seq)
	}
	if lc.shifted[seq] {
		return nil, fmt.Errorf("%w: read rows: sequence %d was shifted and not decoded since; its keys are stale", ErrState, seq)
	}
	m := lc.m
	H, D := m.KVHeads, m.HeadDim()
	st, err := lc.AppendState(nil, seq)
	if err != nil {
		return nil, fmt.Errorf("llamacpp: read rows of sequence %d: %w", seq, err)
	}
	lay, err := parseState(st, m.Layers, H*D)
	if err != nil {
		return nil, fmt.Errorf("llamacpp: read rows of sequence %d: %w", seq, err)
	}
	dt := lc.opts.Cache.DType()
	if lay.typ != lc.opts.Cache.ggml() {
		return nil, fmt.Errorf("%w: state of ggml type %d, context cache %d", ErrState, lay.typ, lc.opts.Cache.ggml())
	}
	n, es := len(lay.pos), lay.esize
	per := n * H * D * es
	r := &Rows{Positions: lay.pos, K: make([][]float32, m.Layers), V: make([][]float32, m.Layers)}
	tmp := make([]byte, per)
	for l := range m.Layers {
		transposeRows(tmp, st[lay.k[l]:lay.k[l]+per], n, H, D*es)
		r.K[l] = make([]float32, n*H*D)
		if err := format.ToF32(r.K[l], tmp, dt); err != nil {
			return nil, err
		}
		if lay.vTrans {
			untransposeV(tmp, st[lay.v[l]:lay.v[l]+per], n, H, D, es)
		} else {
			transposeRows(tmp, st[lay.v[l]:lay.v[l]+per], n, H, D*es)
		}
		r.V[l] = make([]float32, n*H*D)
		if err := format.ToF32(r.V[l], tmp, dt); err != nil {
			return nil, err
		}
	}
	return r, nil
}
