package assemble

import (
	"fmt"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/internal/crc32c"
	"github.com/kvstore/kvstore/reconstruct"
	"github.com/kvstore/kvstore/store/internal/bloblog"
)

// chunkSource yields the rows of one stored chunk, [kv_heads][n][head_dim]:
// slices of the mapping, or, when the blob file is not mapped, rows read
// into the caller's buffer. Unless the chunk is known good (verified
// before by this view or on this mapping, or checksums are off), it is
// checked against its CRC32C as its rows pass: each head's CRC is taken in
// the same pass that places its rows (crc32c.Copy for copied rows), or from
// a run of at most scratch bytes just before the run is rotated or placed
// from cache, and done combines the heads' CRCs and compares them with the
// header's before the layer counts as complete.
type chunkSource struct {
	src    Source
	h      *format.PacketHeader
	i      int
	c      *format.ChunkDesc
	mapped []byte
	n, rb  int
	crcs   []uint32 // per head; nil when the chunk needs no check
}

func (a *Assembly) source(w *worker, p *packet, i, rb int) (chunkSource, error) {
	mapped, check, err := p.src.Raw(i)
	if err != nil {
		return chunkSource{}, fmt.Errorf("assemble: %w", err)
	}
	s := chunkSource{src: p.src, h: p.h, i: i, c: &p.h.Chunks[i], mapped: mapped, n: p.Tokens, rb: rb}
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
		if err := s.src.ReadAt(b, s.c.Offset+uint64(lo)); err != nil {
			return nil, fmt.Errorf("assemble: packet %s: %w", s.h.ID.Short(), err)
		}
	}
	s.sum(h, b)
	return b, nil
}

// sum adds b, head h's next rows, to the head's CRC when the chunk is
// being checked.
func (s *chunkSource) sum(h int, b []byte) {
	if s.crcs != nil {
		s.crcs[h] = crc32c.Update(s.crcs[h], b)
	}
}

// place puts head h's rows [t0, t0+k) into d (k rows, contiguous): copied
// from the mapping with their CRC in the same pass (crc32c.Copy), or read
// from the file into d, or copied or rotated by sh into d (with streaming
// stores when stream is set), their CRC taken first from the run, which
// the copy or rotation then reads from cache. Runs of at most
// scratch bytes keep that second read in cache.
func (s *chunkSource) place(a *Assembly, d []byte, h, t0, k int, sh *reconstruct.Shifter, stream bool) error {
	lo := (h*s.n + t0) * s.rb
	if s.mapped == nil {
		if err := s.src.ReadAt(d, s.c.Offset+uint64(lo)); err != nil {
			return fmt.Errorf("assemble: packet %s: %w", s.h.ID.Short(), err)
		}
		s.sum(h, d)
		return a.shift(d, d, k, sh)
	}
	src := s.mapped[lo : lo+k*s.rb]
	if sh == nil && s.crcs != nil {
		s.crcs[h] = crc32c.Copy(d, src, s.crcs[h])
		return nil
	}
	s.sum(h, src)
	if stream {
		return a.stream(d, src, k, sh)
	}
	return a.shift(d, src, k, sh)
}

// done checks the chunk's CRC32C when it was computed, and counts the read.
func (s *chunkSource) done() error {
	if s.crcs == nil {
		s.src.Counted(s.i)
		return nil
	}
	crc := s.crcs[0]
	for _, c := range s.crcs[1:] {
		crc = bloblog.CRCCombine(crc, c, uint64(s.n*s.rb))
	}
	if err := s.src.Checked(s.i, crc, s.mapped != nil); err != nil {
		return fmt.Errorf("assemble: %w", err)
	}
	return nil
}
