package view

import (
	"errors"
	"fmt"

	"github.com/kvstore/kvstore/internal/crc32c"
)

// CopyChunk copies chunk i's stored bytes, those Chunk returns, into dst,
// which must hold at least the chunk's Length bytes, and returns how many
// it copied: the read a server makes to fill its own buffers. A chunk not
// yet verified has its CRC32C computed in the same pass as the copy
// (crc32c.Copy) instead of a pass of its own, and checked before CopyChunk
// returns; a mismatch is Chunk's *ChunkError (ErrCorruption), every time,
// and leaves dst's first Length bytes unspecified. On a blob file that is
// not mapped the chunk is read straight into dst, its CRC taken piece by
// piece while each piece is in cache (bloblog.File.Chunk).
func (v *View) CopyChunk(dst []byte, i int) (int, error) {
	v.mu.RLock()
	defer v.mu.RUnlock()
	if v.released {
		return 0, fmt.Errorf("%w: view of packet %s was released", v.closed, v.h.ID.Short())
	}
	if i < 0 || i >= len(v.h.Chunks) {
		return 0, fmt.Errorf("%w: chunk %d of a %d-chunk packet", ErrInvalidArgument, i, len(v.h.Chunks))
	}
	c := &v.h.Chunks[i]
	if uint64(len(dst)) < c.Length {
		return 0, fmt.Errorf("%w: copy chunk %d: %d-byte destination for %d bytes", ErrInvalidArgument, i, len(dst), c.Length)
	}
	dst = dst[:c.Length]
	if v.extent == nil {
		return v.copyUnmapped(dst, i)
	}
	rel := c.Offset - v.h.ExtentOffset
	if c.Offset < v.h.ExtentOffset || rel > uint64(len(v.extent)) || c.Length > uint64(len(v.extent))-rel {
		return 0, fmt.Errorf("%w: chunk %d [%d, +%d) outside the view's extent", ErrInvalidArgument, i, c.Offset, c.Length)
	}
	b := v.extent[rel : rel+c.Length : rel+c.Length]
	if v.seen[i].Load() || !v.verify || v.file.IsVerified(c.Offset, c.CRC32C) {
		if err := v.file.Guard(func() error { copy(dst, b); return nil }); err != nil {
			return 0, fmt.Errorf("packet %s chunk %d: %w", v.h.ID.Short(), i, err)
		}
		v.first(i, c.Length)
		return len(dst), nil
	}
	v.advise()
	var crc uint32
	if err := v.file.Guard(func() error { crc = crc32c.Copy(dst, b, 0); return nil }); err != nil {
		return 0, fmt.Errorf("packet %s chunk %d: %w", v.h.ID.Short(), i, err)
	}
	if err := v.checked(i, crc, true); err != nil {
		return 0, err
	}
	return len(dst), nil
}

// copyUnmapped is CopyChunk on a view that copies: from the chunk this view
// already loaded, or read and verified straight into dst.
func (v *View) copyUnmapped(dst []byte, i int) (int, error) {
	v.loadMu.Lock()
	b := v.bufs[i]
	v.loadMu.Unlock()
	if b != nil {
		return copy(dst, b), nil
	}
	b, err := v.file.Chunk(v.h, i, dst, v.verify)
	if err != nil {
		if errors.Is(err, ErrCorruption) {
			v.st.Corruptions.Add(1)
		}
		return 0, err
	}
	if v.verify {
		v.st.VerifiedBytes.Add(uint64(len(b)))
	}
	v.first(i, uint64(len(b)))
	return len(b), nil
}
