package store

import (
	"fmt"

	"github.com/kvstore/kvstore/reconstruct"
)

// fillDecoded places compressed chunk i of packet p: verified (View.Chunk),
// decoded, then rotated by sh (nil: copied) and placed as a mapped raw chunk would be.
// A contiguous destination holding only this packet is the chunk's own
// layout, so the chunk is decoded straight into it and rotated in place;
// otherwise it is decoded into the worker's scratch of one chunk.
func (a *Assembly) fillDecoded(w *assembleWorker, g *destGeom, dst []byte, p *assemblePacket, i int, sh *reconstruct.Shifter) error {
	b, err := p.v.Chunk(i)
	if err != nil {
		return fmt.Errorf("assemble: %w", err)
	}
	raw := int(p.v.h.Chunks[i].RawLength)
	if g.layout == LayoutContiguous && p.Row == 0 && p.Tokens == g.tokens {
		if err := decodeChunk(p.v.h, i, b, dst); err != nil {
			return fmt.Errorf("assemble: %w", err)
		}
		return a.shift(dst, dst, g.heads*p.Tokens, sh)
	}
	if cap(w.dec) < raw {
		w.dec = make([]byte, raw)
	}
	if err := decodeChunk(p.v.h, i, b, w.dec[:raw]); err != nil {
		return fmt.Errorf("assemble: %w", err)
	}
	s := chunkSource{v: p.v, i: i, c: &p.v.h.Chunks[i], mapped: w.dec[:raw], n: p.Tokens, rb: g.rowBytes}
	if g.layout == LayoutContiguous {
		return a.fillContiguous(g, dst, &s, p.Row, sh)
	}
	return a.fillPaged(w, g, dst, &s, p.Row, sh)
}
