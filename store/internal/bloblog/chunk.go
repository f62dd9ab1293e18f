package bloblog

import (
	"fmt"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/internal/crc32c"
)

// ChunkError reports a chunk whose stored bytes do not match the CRC32C in
// its packet header. It wraps ErrCorruption and names where the bad bytes
// are, so that a checker can report or repair them.
type ChunkError struct {
	File     string // blob file path
	Offset   uint64 // of the chunk in the file
	Length   uint64
	Packet   format.PacketID
	Layer    uint32
	Kind     format.ChunkKind
	Want     uint32 // CRC32C in the header
	Computed uint32 // CRC32C of the bytes read
}

func (e *ChunkError) Error() string {
	return fmt.Sprintf("%v: blob file %s offset %d (%d bytes): packet %s layer %d %v: crc32c %08x, computed %08x",
		ErrCorruption, e.File, e.Offset, e.Length, e.Packet.Short(), e.Layer, e.Kind, e.Want, e.Computed)
}

// Unwrap makes errors.Is(err, ErrCorruption) hold.
func (e *ChunkError) Unwrap() error { return ErrCorruption }

// checkChunk verifies b, the stored bytes of chunk c of packet h read from f.
func (f *File) CheckChunk(h *format.PacketHeader, c *format.ChunkDesc, b []byte) error {
	if got := CRC(b); got != c.CRC32C {
		return f.chunkError(h, c, got)
	}
	return nil
}

// chunkError is the ChunkError of chunk c of packet h in f, whose bytes
// gave CRC got.
func (f *File) chunkError(h *format.PacketHeader, c *format.ChunkDesc, got uint32) *ChunkError {
	return &ChunkError{
		File: f.path, Offset: c.Offset, Length: c.Length, Packet: h.ID,
		Layer: c.Layer, Kind: c.Kind, Want: c.CRC32C, Computed: got,
	}
}

// chunk returns the stored bytes of chunk i of packet h, which lives in f
// (the caller holds a reference), verified against its CRC unless verify is
// false. On a mapped file the bytes alias the mapping and nothing is copied
// or allocated; a verified chunk is remembered, so the CRC is computed once
// per mapping. Otherwise the bytes are read into buf, grown if it is short,
// and verified every time. This is the primitive every read path shares.
func (f *File) Chunk(h *format.PacketHeader, i int, buf []byte, verify bool) ([]byte, error) {
	c := &h.Chunks[i]
	b, err := f.Span(c.Offset, c.Length)
	if err != nil {
		return nil, err
	}
	if b == nil {
		return f.copyChunk(h, c, buf, verify)
	}
	if verify && !f.IsVerified(c.Offset, c.CRC32C) {
		if err := f.Guard(func() error { return f.CheckChunk(h, c, b) }); err != nil {
			return nil, err
		}
		f.MarkVerified(c.Offset, c.CRC32C)
	}
	return b, nil
}

// copyChunk reads chunk c into buf (grown if short) and verifies it. It
// reads in pieces of copyPiece bytes and checksums each right after its
// read, while it is still in cache, so that verifying costs no second pass
// from memory over the chunk.
func (f *File) copyChunk(h *format.PacketHeader, c *format.ChunkDesc, buf []byte, verify bool) ([]byte, error) {
	if uint64(cap(buf)) < c.Length {
		buf = make([]byte, c.Length)
	}
	buf = buf[:c.Length]
	if !verify {
		return buf, f.ReadAt(buf, c.Offset)
	}
	var crc uint32
	for off := 0; off < len(buf); off += copyPiece {
		p := buf[off:min(off+copyPiece, len(buf))]
		if err := f.ReadAt(p, c.Offset+uint64(off)); err != nil {
			return nil, err
		}
		crc = crc32c.Update(crc, p)
	}
	if crc != c.CRC32C {
		return nil, f.chunkError(h, c, crc)
	}
	return buf, nil
}

// copyPiece is the read copyChunk checksums at a time: well inside L2.
const copyPiece = 256 << 10
