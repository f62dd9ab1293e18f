package store

import (
	"fmt"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store/internal/bloblog"
)

// chunkSource yields the rows of one stored chunk, [kv_heads][n][head_dim]:
// slices of the mapping, or, when the blob file is not mapped, rows read
// into the caller's buffer. Unless the chunk is known good (verified
// before by this view or on this mapping, or checksums are off), it is
// checked against its CRC32C: a mapped chunk whole, before any row is
// placed; a copied one as its rows pass, each head's CRC computed from the
// buffer just read and the heads' CRCs combined by done.
type chunkSource struct {
	v       *View
	i       int
	c       *format.ChunkDesc
	mapped  []byte
	n, rb   int
	crcs    []uint32 // per head; nil when the chunk needs no check
	counted bool     // the read was counted already (checked)
}

func (a *Assembly) source(w *assembleWorker, p *assemblePacket, i, rb int) (chunkSource, error) {
	mapped, check, err := p.v.rawChunk(i)
	if err != nil {
		return chunkSource{}, fmt.Errorf("assemble: %w", err)
	}
	s := chunkSource{v: p.v, i: i, c: &p.v.h.Chunks[i], mapped: mapped, n: p.Tokens, rb: rb}
	if check && mapped != nil {
		// The whole chunk first, at memory speed (bloblog.CRC): it is then
		// still in the last-level cache while it is placed.
		if err := p.v.checked(i, bloblog.CRC(mapped), true); err != nil {
			return chunkSource{}, fmt.Errorf("assemble: %w", err)
		}
		s.counted = true
		return s, nil
	}
	if check {
		if H := a.spec.KVHeads; cap(w.crcs) < H {
			w.crcs = make([]uint32, H)
		}
		s.crcs = w.crcs[:a.spec.KVHeads]
		clear(s.crcs)
	}
	return s, nil
}

// rows returns head h's rows [t0, t0+k): a slice of the mapping, or buf
// filled from the file.
func (s *chunkSource) rows(h, t0, k int, buf []byte) ([]byte, error) {
	lo := (h*s.n + t0) * s.rb
	var b []byte
	if s.mapped != nil {
		b = s.mapped[lo : lo+k*s.rb]
	} else {
		b = buf[:k*s.rb]
		if err := s.v.file.ReadAt(b, s.c.Offset+uint64(lo)); err != nil {
			return nil, fmt.Errorf("assemble: packet %s: %w", s.v.h.ID.Short(), err)
		}
	}
	if s.crcs != nil {
		s.crcs[h] = format.CRCUpdate(s.crcs[h], b)
	}
	return b, nil
}

// done checks the chunk's CRC32C when it was computed, and counts the read.
func (s *chunkSource) done() error {
	if s.crcs == nil {
		if !s.counted {
			s.v.first(s.i, s.c.Length)
		}
		return nil
	}
	crc := s.crcs[0]
	for _, c := range s.crcs[1:] {
		crc = bloblog.CRCCombine(crc, c, uint64(s.n*s.rb))
	}
	if err := s.v.checked(s.i, crc, s.mapped != nil); err != nil {
		return fmt.Errorf("assemble: %w", err)
	}
	return nil
}

// rawChunk returns chunk i's bytes when the view is mapped (nil when they
// must be copied), unverified, and whether the caller must check them:
// unlike Chunk it does not verify first, so that Assemble can compute the
// CRC in the same pass that places the bytes.
func (v *View) rawChunk(i int) (mapped []byte, check bool, err error) {
	v.mu.RLock()
	defer v.mu.RUnlock()
	if v.released {
		return nil, false, fmt.Errorf("%w: view of packet %s was released", ErrClosed, v.h.ID.Short())
	}
	c := &v.h.Chunks[i]
	if v.extent == nil {
		return nil, v.verify, nil
	}
	rel := c.Offset - v.h.ExtentOffset
	mapped = v.extent[rel : rel+c.Length : rel+c.Length]
	return mapped, v.verify && !v.seen[i].Load() && !v.file.IsVerified(c.Offset, c.CRC32C), nil
}

// checked finishes a chunk whose CRC32C the caller computed: it compares
// crc with the header's, remembers a mapped chunk as verified, and counts
// the read, as Chunk does for the chunks it verifies.
func (v *View) checked(i int, crc uint32, mapped bool) error {
	c := &v.h.Chunks[i]
	if crc != c.CRC32C {
		v.st.corruptions.Add(1)
		return &ChunkError{
			File: v.file.Path(), Offset: c.Offset, Length: c.Length, Packet: v.h.ID,
			Layer: c.Layer, Kind: c.Kind, Want: c.CRC32C, Computed: crc,
		}
	}
	if mapped {
		v.file.MarkVerified(c.Offset, c.CRC32C)
	}
	v.st.verifiedBytes.Add(c.Length)
	v.first(i, c.Length)
	return nil
}
