package assemble

import (
	"fmt"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/prune"
	"github.com/kvstore/kvstore/reconstruct"
)

// Pruned assembly.
//
// An Item with a keep-set places, for every (layer, KV head), only the
// rows the set lists, in position order, at the item's rows [Row, Row+k)
// of that head: k rows per (layer, KV head), the same k for every head
// (prune's policies keep a fixed budget per head), so every destination
// layout holds a pruned packet as it holds any other, with k rows. Which
// position each row has differs per (layer, KV head) (the subsets are
// ragged): Assembly.Positions returns that index map, the absolute
// position of every destination row of one (layer, KV head). A kept key is
// rotated from its stored local position t to Offset+t, the same rotation
// every key of the packet gets, so no other row moves and nothing is
// recomputed; a server attends over the k rows as they are (no mask is
// needed) and uses the index map wherever it needs positions.
//
// A packet stored pruned (Source.Keep) is placed the same way without a
// keep-set: its k stored rows per head go to [Row, Row+k) along the
// ordinary (mapped, streamed or decoded) path, keys rotated by Offset from
// their stored original positions, and the item's Packet.Keep is its
// stored keep-set, so Positions is the same index map. A keep-set given
// for such a packet selects from what was stored: it is over the
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

// selectRows decides which of source s's rows an item with keep-set keep
// (nil: none) places. A keep-set that does not fit the packet, keeps
// different numbers of rows per (layer, KV head), or keeps a row a pruned
// packet did not store is ErrInvalidArgument; a bad stored positions chunk
// is ErrCorruption.
func selectRows(s Source, keep *prune.Set) (rowSelection, error) {
	h := s.Header()
	stored, err := s.Keep()
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

// fillPruned places the selected rows (p.sel) of chunk i of packet p: the
// chunk is verified whole (Source.Chunk) and, when compressed, decoded
// into the worker's scratch; each selected row is then copied to its
// destination row and keys rotated there by sh (nil: copied).
func (a *Assembly) fillPruned(w *worker, g *geom, dst []byte, p *packet, i int, sh *reconstruct.Shifter) error {
	b, err := w.wholeChunk(p, i)
	if err != nil {
		return err
	}
	n, rb := int(p.h.Rows()), g.rowBytes
	for h := range g.heads {
		keep := p.sel[i/2*g.heads+h]
		if g.layout == format.KVLayoutHND {
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
