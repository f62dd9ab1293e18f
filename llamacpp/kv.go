//go:build (linux || darwin) && (amd64 || arm64)

package llamacpp

import (
	"context"
	"fmt"
	"math"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store"
)

// Save stores sequence seq of lc as one packet in namespace ns of db and
// returns its id. tokens are the ids of the sequence's cells, in cell
// order; the cells must sit at consecutive positions p0, p0+1, ... (any
// p0: Put rotates the keys back to local positions 0..n-1). The values of
// a transposed V cache are transposed back; F32 and F16 caches are stored
// as f32 and f16 packets of the model's Spec. A sequence shifted since its
// last Decode is refused (ErrState): llama.cpp re-rotates its keys only at
// the next decode.
func Save(ctx context.Context, db *store.DB, ns string, lc *Context, seq int, tokens []uint32) (format.PacketID, error) {
	if !lc.seqOK(seq) {
		return format.PacketID{}, lc.badSeq("save", seq)
	}
	return save(ctx, db, ns, lc, seq, tokens)
}

func save(ctx context.Context, db *store.DB, ns string, lc *Context, seq int, tokens []uint32) (format.PacketID, error) {
	var id format.PacketID
	if lc.shifted[seq] {
		return id, fmt.Errorf("%w: save: sequence %d was shifted and not decoded since; its keys are stale", ErrState, seq)
	}
	cells, err := readCells(lc, seq)
	if err != nil {
		return id, fmt.Errorf("llamacpp: save sequence %d: %w", seq, err)
	}
	n := len(cells.pos)
	if len(tokens) != n {
		return id, fmt.Errorf("%w: save: %d token ids for %d cells", ErrInvalidArgument, len(tokens), n)
	}
	p := &store.Packet{
		PacketDesc: format.PacketDesc{Namespace: ns, Model: cells.spec, TokenIDs: tokens, BasePosition: int(cells.pos[0])},
		Layers:     make([]store.Layer, len(cells.k)),
	}
	for l := range p.Layers {
		p.Layers[l] = store.Layer{K: cells.k[l], V: cells.v[l]}
	}
	if id, err = db.Put(ctx, p); err != nil {
		return id, fmt.Errorf("llamacpp: save: %w", err)
	}
	return id, nil
}

// cells are a sequence's cells read back from its state: their positions
// (consecutive) and every layer's keys and values in a packet's layout,
// [kv_heads][cells][head_dim] of spec's dtype (the cache's element type).
type cells struct {
	spec *format.ModelSpec
	pos  []int32
	k, v [][]byte
}

// readCells exports sequence seq's state and turns its token-major K rows
// and its transposed (or not) V into a packet's head-major chunks.
func readCells(lc *Context, seq int) (*cells, error) {
	spec, err := lc.m.Spec(lc.opts.Cache)
	if err != nil {
		return nil, err
	}
	st, err := lc.AppendState(nil, seq)
	if err != nil {
		return nil, err
	}
	H, D := spec.KVHeads, spec.HeadDim
	lay, err := parseState(st, spec.Layers, H*D)
	if err != nil {
		return nil, err
	}
	if lay.typ != lc.opts.Cache.ggml() {
		return nil, fmt.Errorf("%w: state of ggml type %d, context cache %d", ErrState, lay.typ, lc.opts.Cache.ggml())
	}
	n := len(lay.pos)
	if n == 0 {
		return nil, fmt.Errorf("%w: the sequence holds no cells", ErrState)
	}
	for i, p := range lay.pos {
		if p != lay.pos[0]+int32(i) {
			return nil, fmt.Errorf("%w: cell %d at position %d, not %d: the cells are not consecutive", ErrState, i, p, lay.pos[0]+int32(i))
		}
	}
	c := &cells{spec: spec, pos: lay.pos, k: make([][]byte, spec.Layers), v: make([][]byte, spec.Layers)}
	es, per := lay.esize, n*H*D*lay.esize
	for l := range spec.Layers {
		k, v := make([]byte, per), make([]byte, per)
		transposeRows(k, st[lay.k[l]:lay.k[l]+per], n, H, D*es)
		if lay.vTrans {
			untransposeV(v, st[lay.v[l]:lay.v[l]+per], n, H, D, es)
		} else {
			transposeRows(v, st[lay.v[l]:lay.v[l]+per], n, H, D*es)
		}
		c.k[l], c.v[l] = k, v
	}
	return c, nil
}

// transposeRows turns token-major [n][H] rows of rb bytes into head-major
// [H][n].
func transposeRows(dst, src []byte, n, H, rb int) {
	for t := range n {
		for h := range H {
			copy(dst[(h*n+t)*rb:(h*n+t+1)*rb], src[(t*H+h)*rb:])
		}
	}
}

// untransposeV turns transposed values [H*D][n] into [H][n][D].
func untransposeV(dst, src []byte, n, H, D, es int) {
	for h := range H {
		for d := range D {
			row := src[(h*D+d)*n*es : (h*D+d+1)*n*es]
			for t := range n {
				o := ((h*n+t)*D + d) * es
				copy(dst[o:o+es], row[t*es:(t+1)*es])
			}
		}
	}
}

// Loaded is what Load placed.
type Loaded struct {
	Cells   int                     // cells restored
	Next    int                     // one past the largest position: where decoding continues
	Packets []store.AssembledPacket // where each item's rows went
}

// Load assembles the packets named by items (store.Assemble: each
// re-rotated to its Offset) straight into a llama.cpp state of sequence seq
// and imports it: the sequence then holds exactly those cells, at the
// positions Assemble chose. Packets are looked up under lc's model Spec,
// so packets of another model are store.ErrModelMismatch. On any failure
// the sequence is left empty. Pruned packets are refused: a llama.cpp cell
// has one position for every layer and head.
func Load(ctx context.Context, db *store.DB, ns string, lc *Context, seq int, items []store.AssembleItem, o *store.AssembleOptions) (*Loaded, error) {
	if !lc.seqOK(seq) {
		return nil, lc.badSeq("load", seq)
	}
	lc.Remove(seq, -1, -1)
	l, err := load(ctx, db, ns, lc, seq, items, o)
	if err != nil {
		lc.Remove(seq, -1, -1)
		return nil, fmt.Errorf("llamacpp: load sequence %d: %w", seq, err)
	}
	delete(lc.shifted, seq)
	return l, nil
}

func load(ctx context.Context, db *store.DB, ns string, lc *Context, seq int, items []store.AssembleItem, o *store.AssembleOptions) (*Loaded, error) {
	spec, err := lc.m.Spec(lc.opts.Cache)
	if err != nil {
		return nil, err
	}
	a, err := db.PrepareAssemble(ctx, ns, spec.Fingerprint(), items)
	if err != nil {
		return nil, err
	}
	defer a.Release()
	packets := a.Packets()
	for i, p := range packets {
		if p.Keep != nil {
			return nil, fmt.Errorf("%w: item %d (packet %s) is pruned", ErrInvalidArgument, i, p.ID.Short())
		}
	}
	n := a.Tokens()
	if n > lc.Cells() {
		return nil, fmt.Errorf("%w: %d cells do not fit a context of %d", ErrInvalidArgument, n, lc.Cells())
	}
	pos64, err := a.Positions(0, 0)
	if err != nil {
		return nil, err
	}
	pos := make([]int32, n)
	next := int64(0)
	for i, p := range pos64 {
		if p > math.MaxInt32-1 {
			return nil, fmt.Errorf("%w: position %d", ErrInvalidArgument, p)
		}
		pos[i] = int32(p)
		next = max(next, p+1)
	}
	vTrans := !lc.opts.FlashAttn
	// The state is built in the context's scratch, kept between loads:
	// Assemble writes every K and V byte, and set_data copies the state
	// into the cache, so the buffer is neither cleared nor kept busy.
	buf, lay, err := buildState(lc.scratch, int32(seq), 1, pos, spec.Layers, spec.KVHeads*spec.HeadDim, lc.opts.Cache.ggml(), vTrans)
	if err != nil {
		return nil, err
	}
	lc.scratch = buf
	if err := a.Run(ctx, stateDest(buf, lay), o); err != nil {
		return nil, err
	}
	if err := lc.SetState(seq, buf); err != nil {
		return nil, err
	}
	return &Loaded{Cells: n, Next: int(next), Packets: packets}, nil
}

// stateDest is the Assemble destination that is the state's K and V parts.
func stateDest(buf []byte, lay *stateLayout) *store.Dest {
	per := len(lay.pos) * lay.rowDim * lay.esize
	d := &store.Dest{Layout: store.LayoutPaged, BlockSize: len(lay.pos), BlockTable: []int32{0},
		K: make([][]byte, len(lay.k)), V: make([][]byte, len(lay.v))}
	if lay.vTrans {
		d.Layout, d.BlockSize, d.BlockTable = store.LayoutTransposedV, 0, nil
	}
	for l := range lay.k {
		d.K[l] = buf[lay.k[l] : lay.k[l]+per : lay.k[l]+per]
		d.V[l] = buf[lay.v[l] : lay.v[l]+per : lay.v[l]+per]
	}
	return d
}
