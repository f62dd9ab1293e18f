package store

import (
	"fmt"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/prune"
	"github.com/kvstore/kvstore/reconstruct"
)

// Pruned assembly.
//
// An AssembleItem with a keep-set places, for every (layer, KV head), only
// the rows the set lists, in position order, at the item's rows
// [Row, Row+k) of that head: k rows per (layer, KV head), the same k for
// every head (prune's policies keep a fixed budget per head), so both
// destination layouts hold a pruned packet as they hold any other, with
// k rows. Which position each row has differs per (layer, KV head) (the
// subsets are ragged): Assembly.Positions returns that index map, the
// absolute position of every destination row of one (layer, KV head). A
// kept key is rotated from its stored local position t to Offset+t, the
// same rotation every key of the packet gets, so no other row moves and
// nothing is recomputed; a server attends over the k rows as they are (no
// mask is needed) and uses the index map wherever it needs positions.
//
// A packet stored pruned (Packet.Keep, pruned.go) is placed the same way
// without a keep-set: its k stored rows per head go to [Row, Row+k) along
// the ordinary (mapped, streamed or decoded) path, keys rotated by Offset
// from their stored original positions, and the item's AssembledPacket.Keep
// is its stored keep-set, so Positions is the same index map. A keep-set
// given for such a packet selects from what was stored: it is over the
// document's positions 0..Tokens-1 and every position it keeps must have
// been stored for that (layer, KV head), else ErrInvalidArgument.

// rowSelection is what an item places: rows per (layer, KV head), the
// keep-set in effect (nil: all rows) and, when rows are picked while
// placing, the stored row indexes per (layer, KV head).
type rowSelection struct {
	rows int
	keep *prune.Set
	src  [][]int32
}

// selectRows decides which of view v's rows an item with keep-set keep
// (nil: none) places. A keep-set that does not fit the packet, keeps
// different numbers of rows per (layer, KV head), or keeps a row a pruned
// packet did not store is ErrInvalidArgument; a bad stored positions chunk
// is ErrCorruption.
func selectRows(v *View, keep *prune.Set) (rowSelection, error) {
	h := v.Header()
	stored, err := v.Keep()
	if err != nil {
		return rowSelection{}, err
	}
	if keep == nil {
		return rowSelection{rows: int(h.Rows()), keep: stored}, nil
	}
	n, err := keptRows(h, keep)
	if err != nil {
		return rowSelection{}, err
	}
	if stored == nil {
		return rowSelection{rows: n, keep: keep, src: keep.Keep}, nil
	}
	src, err := storedIndexes(stored, keep)
	if err != nil {
		return rowSelection{}, err
	}
	return rowSelection{rows: n, keep: keep, src: src}, nil
}

// storedIndexes maps each position keep keeps to its row among the rows
// stored (stored's positions); ErrInvalidArgument if one was not stored.
func storedIndexes(stored, keep *prune.Set) ([][]int32, error) {
	out := make([][]int32, len(keep.Keep))
	for g, list := range keep.Keep {
		have := stored.Keep[g]
		out[g] = make([]int32, len(list))
		j := 0
		for i, t := range list {
			for j < len(have) && have[j] < t {
				j++
			}
			if j == len(have) || have[j] != t {
				return nil, fmt.Errorf("%w: keep-set keeps position %d of layer %d head %d, which the pruned packet did not store",
					ErrInvalidArgument, t, g/keep.KVHeads, g%keep.KVHeads)
			}
			out[g][i] = int32(j)
		}
	}
	return out, nil
}

// keptRows is the number of rows keep places per (layer, KV head) of a
// packet of header h; ErrInvalidArgument when keep does not fit the
// packet's layers, heads and tokens (the document's, even when it was
// stored pruned) or keeps different numbers of rows per (layer, KV head).
func keptRows(h *format.PacketHeader, keep *prune.Set) (int, error) {
	if err := keep.Validate(); err != nil {
		return 0, fmt.Errorf("assemble: %w", err) // wraps ErrInvalidArgument
	}
	if keep.Layers != int(h.Layers) || keep.KVHeads != int(h.KVHeads) || keep.Tokens != int(h.Tokens) {
		return 0, fmt.Errorf("%w: keep-set for %d layers x %d heads x %d tokens, packet is %d x %d x %d",
			ErrInvalidArgument, keep.Layers, keep.KVHeads, keep.Tokens, h.Layers, h.KVHeads, h.Tokens)
	}
	n, ok := keep.Rows()
	if !ok {
		return 0, fmt.Errorf("%w: keep-set keeps different numbers of rows per (layer, head)", ErrInvalidArgument)
	}
	return n, nil
}

// wholeChunk returns chunk i of packet p verified whole (View.Chunk) and,
// when compressed, decoded into the worker's scratch.
func (w *assembleWorker) wholeChunk(p *assemblePacket, i int) ([]byte, error) {
	b, err := p.v.Chunk(i)
	if err != nil {
		return nil, fmt.Errorf("assemble: %w", err)
	}
	if c := &p.v.h.Chunks[i]; c.Codec != format.CodecRaw {
		raw := int(c.RawLength)
		if cap(w.dec) < raw {
			w.dec = make([]byte, raw)
		}
		if err := decodeChunk(p.v.h, i, b, w.dec[:raw]); err != nil {
			return nil, fmt.Errorf("assemble: %w", err)
		}
		b = w.dec[:raw]
	}
	return b, nil
}

// fillPruned places the selected rows (p.src) of chunk i of packet p: the
// chunk is verified whole (View.Chunk) and, when compressed, decoded into
// the worker's scratch; each selected row is then copied to its
// destination row and keys rotated there by sh (nil: copied).
func (a *Assembly) fillPruned(w *assembleWorker, g *destGeom, dst []byte, p *assemblePacket, i int, sh *reconstruct.Shifter) error {
	b, err := w.wholeChunk(p, i)
	if err != nil {
		return err
	}
	n, rb := int(p.v.h.Rows()), g.rowBytes
	for h := range g.heads {
		keep := p.src[i/2*g.heads+h]
		if g.layout == LayoutContiguous {
			off := g.offset(h, p.Row)
			d := dst[off : off+len(keep)*rb]
			for j, t := range keep {
				copy(d[j*rb:(j+1)*rb], b[(h*n+int(t))*rb:])
			}
			if err := a.shift(d, d, len(keep), sh); err != nil {
				return err
			}
			continue
		}
		for j, t := range keep {
			off := g.offset(h, p.Row+j)
			d := dst[off : off+rb]
			copy(d, b[(h*n+int(t))*rb:])
			if err := a.shift(d, d, 1, sh); err != nil {
				return err
			}
		}
	}
	return nil
}

// Positions is the index map of (layer, KV head): the absolute position of
// each of the destination's Tokens() rows of that head, in row order.
// Without keep-sets it is each item's Offset, Offset+1, ...; a pruned
// item's rows (a keep-set given, or a packet stored pruned) have Offset +
// their kept local positions.
func (a *Assembly) Positions(layer, head int) ([]int64, error) {
	if layer < 0 || layer >= a.spec.Layers || head < 0 || head >= a.spec.KVHeads {
		return nil, fmt.Errorf("%w: positions of layer %d head %d of a %d x %d model", ErrInvalidArgument, layer, head, a.spec.Layers, a.spec.KVHeads)
	}
	out := make([]int64, 0, a.tokens)
	for _, p := range a.packets {
		if p.Keep == nil {
			for j := range p.Tokens {
				out = append(out, p.Offset+int64(j))
			}
			continue
		}
		for _, t := range p.Keep.Kept(layer, head) {
			out = append(out, p.Offset+int64(t))
		}
	}
	return out, nil
}

// PrepareAssemblePruned is PrepareAssemble with a keep-set per item (see
// package prune): keep[i] nil places item i as stored (whole, or the rows a
// pruned packet kept), otherwise only the rows it keeps, k per (layer, KV
// head) (the same k for every head). The assembly then has fewer rows,
// Packets reports each item's Tokens = k and its keep-set, and Positions
// gives each (layer, KV head)'s index map. A keep-set is over the
// document's positions 0..Tokens-1 even for a packet stored pruned, whose
// stored rows it must then select from. A keep-set that does not fit its
// packet, keeps different numbers of rows per head, or keeps a row a
// pruned packet did not store is ErrInvalidArgument.
func (db *DB) PrepareAssemblePruned(ns string, model format.Fingerprint, items []AssembleItem, keep []*prune.Set) (*Assembly, error) {
	if len(keep) != len(items) {
		return nil, fmt.Errorf("%w: assemble: %d keep-sets for %d items", ErrInvalidArgument, len(keep), len(items))
	}
	return db.prepareAssemble(ns, model, items, keep)
}
