//go:build (linux || darwin) && (amd64 || arm64)

package llamacpp

import (
	"encoding/binary"
	"fmt"
	"math"
)

// A sequence's state, as llama_state_seq_get_data writes it and
// llama_state_seq_set_data reads it (llama.cpp v0.5.0, a model whose cells
// carry no extension, all little endian):
//
//	+-------------------------------------------------------------------+
//	| magic u32 0xaf143cd8 | seq_id i32 (ignored on import) | n_stream u32 |
//	+-------------------------------------------------------------------+
//	| per stream: cell_count u32, and when it is not 0:                 |
//	|   cell_count x { pos i32 | n_seq_id u32 (1) | seq_id i32 }         |
//	|   v_trans u32 | n_layer u32                                       |
//	|   n_layer x { k_type i32 | k_row_bytes u64 | cells x K row }      |
//	|   v_trans 0: n_layer x { v_type i32 | v_row_bytes u64 | V rows }  |
//	|   v_trans 1: n_layer x { v_type i32 | elem_bytes u32 |            |
//	|                          n_embd_v u32 | n_embd_v x cells values } |
//	+-------------------------------------------------------------------+
//
// A K row is one cell's post-RoPE keys, [n_head_kv][head_dim]; a V row its
// values likewise; transposed V is [n_head_kv*head_dim][cells].

// StateMagic begins every sequence state.
const StateMagic = 0xaf143cd8

// stateLayout says where the parts of a state with cells lie.
type stateLayout struct {
	nStream int
	stream  int // the stream holding the cells
	pos     []int32
	vTrans  bool
	typ     int32 // ggml type of K and V
	esize   int
	rowDim  int   // n_head_kv * head_dim
	k, v    []int // per layer: offset of the K rows, of the V rows or values
	size    int
}

func ggmlSize(t int32) int {
	switch t {
	case ggmlF32:
		return 4
	case ggmlF16, ggmlBF16:
		return 2
	}
	return 0
}

// parseState checks a state of one sequence with cells in one stream,
// of layers layers of rowDim-element rows, and returns its layout. Errors
// wrap ErrState.
func parseState(b []byte, layers, rowDim int) (*stateLayout, error) {
	r := &stateReader{b: b}
	s, err := r.layout(layers, rowDim)
	if err != nil {
		return nil, fmt.Errorf("%w: at byte %d of %d: %v", ErrState, r.off, len(b), err)
	}
	return s, nil
}

type stateReader struct {
	b   []byte
	off int
	err error
}

func (r *stateReader) u32() uint32 {
	if r.err == nil && len(r.b)-r.off < 4 {
		r.err = fmt.Errorf("truncated")
	}
	if r.err != nil {
		return 0
	}
	v := binary.LittleEndian.Uint32(r.b[r.off:])
	r.off += 4
	return v
}

func (r *stateReader) u64() uint64 {
	lo := uint64(r.u32())
	return lo | uint64(r.u32())<<32
}

// skip passes n bytes and returns where they start.
func (r *stateReader) skip(n uint64) int {
	if r.err == nil && n > uint64(len(r.b)-r.off) {
		r.err = fmt.Errorf("%d bytes wanted, %d left", n, len(r.b)-r.off)
	}
	if r.err != nil {
		return 0
	}
	at := r.off
	r.off += int(n)
	return at
}

func (r *stateReader) layout(layers, rowDim int) (*stateLayout, error) {
	if m := r.u32(); r.err == nil && m != StateMagic {
		return nil, fmt.Errorf("magic %#x, want %#x", m, StateMagic)
	}
	r.u32() // seq id
	s := &stateLayout{nStream: int(r.u32()), stream: -1, rowDim: rowDim}
	if r.err == nil && (s.nStream <= 0 || s.nStream > 256) {
		return nil, fmt.Errorf("%d streams", s.nStream)
	}
	for st := 0; st < s.nStream && r.err == nil; st++ {
		n := r.u32()
		if n == 0 {
			continue
		}
		if s.stream >= 0 {
			return nil, fmt.Errorf("cells in streams %d and %d", s.stream, st)
		}
		s.stream = st
		if err := r.cells(s, n); err != nil {
			return nil, err
		}
		if err := r.layers(s, layers); err != nil {
			return nil, err
		}
	}
	if r.err != nil {
		return nil, r.err
	}
	if s.stream < 0 {
		return nil, fmt.Errorf("no cells")
	}
	if r.off != len(r.b) {
		return nil, fmt.Errorf("%d bytes after the state", len(r.b)-r.off)
	}
	s.size = r.off
	return s, nil
}

func (r *stateReader) cells(s *stateLayout, n uint32) error {
	if uint64(n)*12 > uint64(len(r.b)-r.off) {
		return fmt.Errorf("%d cells cannot fit in %d bytes", n, len(r.b)-r.off)
	}
	s.pos = make([]int32, n)
	for i := range s.pos {
		s.pos[i] = int32(r.u32())
		if ns := r.u32(); r.err == nil && ns != 1 {
			return fmt.Errorf("cell %d belongs to %d sequences", i, ns)
		}
		r.u32()
	}
	return r.err
}

func (r *stateReader) layers(s *stateLayout, layers int) error {
	vt := r.u32()
	nl := r.u32()
	if r.err != nil {
		return r.err
	}
	if vt > 1 || int(nl) != layers {
		return fmt.Errorf("v_trans %d, %d layers (the model has %d)", vt, nl, layers)
	}
	s.vTrans = vt == 1
	cells := uint64(len(s.pos))
	s.typ = -1
	typ := func(t int32) error {
		if ggmlSize(t) == 0 || (s.typ >= 0 && t != s.typ) {
			return fmt.Errorf("cache type %d (this package reads f32, f16 and bf16, one type for K and V)", t)
		}
		s.typ, s.esize = t, ggmlSize(t)
		return nil
	}
	s.k, s.v = make([]int, layers), make([]int, layers)
	for l := range layers {
		if err := typ(int32(r.u32())); err != nil {
			return err
		}
		if rb := r.u64(); r.err == nil && rb != uint64(s.rowDim*s.esize) {
			return fmt.Errorf("layer %d: K rows of %d bytes, want %d", l, rb, s.rowDim*s.esize)
		}
		s.k[l] = r.skip(cells * uint64(s.rowDim*s.esize))
	}
	for l := range layers {
		if err := typ(int32(r.u32())); err != nil {
			return err
		}
		if s.vTrans {
			es, ne := r.u32(), r.u32()
			if r.err == nil && (int(es) != s.esize || int(ne) != s.rowDim) {
				return fmt.Errorf("layer %d: V of %d-byte elements x %d, want %d x %d", l, es, ne, s.esize, s.rowDim)
			}
		} else if rb := r.u64(); r.err == nil && rb != uint64(s.rowDim*s.esize) {
			return fmt.Errorf("layer %d: V rows of %d bytes, want %d", l, rb, s.rowDim*s.esize)
		}
		s.v[l] = r.skip(cells * uint64(s.rowDim*s.esize))
	}
	return r.err
}

// buildState lays out the state of one sequence seq of cells at pos, in
// stream 0 of nStream, in scratch when it is large enough (else in new
// memory), and returns it with its K and V parts unwritten: they hold
// whatever scratch held, for the caller to overwrite whole.
func buildState(scratch []byte, seq int32, nStream int, pos []int32, layers, rowDim int, typ int32, vTrans bool) ([]byte, *stateLayout, error) {
	es := ggmlSize(typ)
	n := len(pos)
	per := uint64(n) * uint64(rowDim) * uint64(es)
	total := 12 + 4*uint64(nStream) + 12*uint64(n) + 8 + uint64(layers)*(2*per+12+12)
	if es == 0 || n == 0 || nStream <= 0 || total > math.MaxInt32*4 {
		return nil, nil, fmt.Errorf("%w: state of %d cells of %d x %d elements of type %d", ErrInvalidArgument, n, layers, rowDim, typ)
	}
	b := scratch[:0]
	if uint64(cap(b)) < total {
		b = make([]byte, 0, total)
	}
	u32 := func(v uint32) { b = binary.LittleEndian.AppendUint32(b, v) }
	u64 := func(v uint64) { b = binary.LittleEndian.AppendUint64(b, v) }
	s := &stateLayout{nStream: nStream, pos: pos, vTrans: vTrans, typ: typ, esize: es, rowDim: rowDim,
		k: make([]int, layers), v: make([]int, layers)}
	u32(StateMagic)
	u32(uint32(seq))
	u32(uint32(nStream))
	u32(uint32(n))
	for _, p := range pos {
		u32(uint32(p))
		u32(1)
		u32(uint32(seq))
	}
	if vTrans {
		u32(1)
	} else {
		u32(0)
	}
	u32(uint32(layers))
	for l := range layers {
		u32(uint32(typ))
		u64(uint64(rowDim * es))
		s.k[l] = len(b)
		b = b[:len(b)+int(per)]
	}
	for l := range layers {
		u32(uint32(typ))
		if vTrans {
			u32(uint32(es))
			u32(uint32(rowDim))
		} else {
			u64(uint64(rowDim * es))
		}
		s.v[l] = len(b)
		b = b[:len(b)+int(per)]
	}
	for range nStream - 1 { // the other streams hold no cells
		u32(0)
	}
	s.size = len(b)
	return b, s, nil
}
