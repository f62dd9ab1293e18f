package assemble

import (
	"fmt"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/reconstruct"
)

// fillDecoded places compressed chunk i of packet p: verified
// (Source.Chunk), decoded, then rotated by sh (nil: copied) and placed as
// a mapped raw chunk would be. A contiguous destination holding only this
// packet is the chunk's own layout, so the chunk is decoded straight into
// it and rotated in place; otherwise it is decoded into the worker's
// scratch of one chunk.
func (a *Assembly) fillDecoded(w *worker, g *geom, dst []byte, p *packet, i int, sh *reconstruct.Shifter) error {
	b, err := p.src.Chunk(i)
	if err != nil {
		return fmt.Errorf("assemble: %w", err)
	}
	raw := int(p.h.Chunks[i].RawLength)
	if g.layout == format.KVLayoutHND && p.Row == 0 && p.Tokens == g.tokens {
		if err := p.src.Decode(i, b, dst); err != nil {
			return fmt.Errorf("assemble: %w", err)
		}
		return a.shift(dst, dst, g.heads*p.Tokens, sh)
	}
	if cap(w.dec) < raw {
		w.dec = make([]byte, raw)
	}
	if err := p.src.Decode(i, b, w.dec[:raw]); err != nil {
		return fmt.Errorf("assemble: %w", err)
	}
	s := chunkSource{src: p.src, h: p.h, i: i, c: &p.h.Chunks[i], mapped: w.dec[:raw], n: p.Tokens, rb: g.rowBytes}
	if g.layout == format.KVLayoutHND {
		return a.fillContiguous(g, dst, &s, p.Row, sh)
	}
	return a.fillPaged(w, g, dst, &s, p.Row, sh)
}

// wholeChunk returns chunk i of packet p verified whole (Source.Chunk)
// and, when compressed, decoded into the worker's scratch.
func (w *worker) wholeChunk(p *packet, i int) ([]byte, error) {
	b, err := p.src.Chunk(i)
	if err != nil {
		return nil, fmt.Errorf("assemble: %w", err)
	}
	if c := &p.h.Chunks[i]; c.Codec != format.CodecRaw {
		raw := int(c.RawLength)
		if cap(w.dec) < raw {
			w.dec = make([]byte, raw)
		}
		if err := p.src.Decode(i, b, w.dec[:raw]); err != nil {
			return nil, fmt.Errorf("assemble: %w", err)
		}
		b = w.dec[:raw]
	}
	return b, nil
}
