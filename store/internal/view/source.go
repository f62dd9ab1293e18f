package view

import (
	"fmt"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store/internal/bloblog"

	"github.com/kvstore/kvstore/prune"
)

// Source is a View as an assemble.Source (store/internal/assemble): its
// chunks read in place (mapped) or from the file, verified by the view or
// by the assembly as it places them. Its methods are not the View's, so
// that they stay off the store's public View.
type Source struct{ *View }

// SourceOf is v as an assemble.Source.
func SourceOf(v *View) Source { return Source{v} }

// Raw returns chunk i's bytes when the view is mapped (nil when they must
// be copied), unverified, and whether the caller must check them: unlike
// Chunk it does not verify first, so that Assemble can compute the CRC in
// the same pass that places the bytes.
//
// A mapped chunk not yet verified on this mapping, in an extent of at
// most adviseMax bytes, is returned nil too, to be read with ReadAt: its
// first pass is usually the first over its pages since Open, and a fresh
// mapping takes a page fault every few pages while a read copies cached
// pages without touching the page table, the CRC then taken over bytes
// in cache. Once verified (Checked remembers it for the mapping), later
// reads of a larger extent use the mapping; an extent of at most readMax
// bytes is always read.
func (s Source) Raw(i int) (mapped []byte, check bool, err error) {
	v := s.View
	v.mu.RLock()
	defer v.mu.RUnlock()
	if v.released {
		return nil, false, fmt.Errorf("%w: view of packet %s was released", v.closed, v.h.ID.Short())
	}
	c := &v.h.Chunks[i]
	if v.extent == nil {
		return nil, v.verify, nil
	}
	check = v.verify && !v.seen[i].Load() && !v.file.IsVerified(c.Offset, c.CRC32C)
	if len(v.extent) <= readMax || (check && len(v.extent) <= adviseMax) {
		return nil, check, nil
	}
	return v.chunkBytes(c), check, nil
}

// readMax is the largest extent whose chunks Assemble always reads with
// ReadAt, never through the mapping. The mapping's first pass after Open
// faults its pages in, which cost more than the reads save afterwards
// for a small packet: in llamacpp's BenchmarkRestore, a 256-token restore
// read through the mapping the second time after Open took 2-3x
// llama.cpp's load_file, read with ReadAt about a third less than
// load_file, and the warm reads after it about a third more than through
// the mapping (0.12 against 0.09 ms in the fill). From a few MiB the
// mapping's warm reads gain more than its first pass costs (4 MiB: 1.2
// against 1.5 ms a fill).
const readMax = 2 << 20

// chunkBytes is chunk c's bytes in the mapped extent.
func (v *View) chunkBytes(c *format.ChunkDesc) []byte {
	rel := c.Offset - v.h.ExtentOffset
	return v.extent[rel : rel+c.Length : rel+c.Length]
}

// ReadAt reads the view's blob file.
func (s Source) ReadAt(b []byte, off uint64) error { return s.file.ReadAt(b, off) }

// Checked is View.checked. Bytes read with ReadAt from a mapped view's file are the bytes its
// mapping shows (a blob file's written bytes never change), so they are
// remembered as verified for the mapping as well.
func (s Source) Checked(i int, crc uint32, mapped bool) error {
	return s.checked(i, crc, mapped || s.isMapped())
}

// isMapped reports whether the view aliases a mapping.
func (v *View) isMapped() bool {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return v.extent != nil
}

// checked finishes a chunk whose CRC32C the caller computed: it compares
// crc with the header's, remembers a mapped chunk as verified, and counts
// the read, as Chunk does for the chunks it verifies.
func (v *View) checked(i int, crc uint32, mapped bool) error {
	c := &v.h.Chunks[i]
	if crc != c.CRC32C {
		v.st.Corruptions.Add(1)
		return &bloblog.ChunkError{
			File: v.file.Path(), Offset: c.Offset, Length: c.Length, Packet: v.h.ID,
			Layer: c.Layer, Kind: c.Kind, Want: c.CRC32C, Computed: crc,
		}
	}
	if mapped {
		v.file.MarkVerified(c.Offset, c.CRC32C)
	}
	v.st.VerifiedBytes.Add(c.Length)
	v.first(i, c.Length)
	return nil
}

// Counted counts chunk i's read when it needed no check.
func (s Source) Counted(i int) { s.first(i, s.h.Chunks[i].Length) }

// Decode decodes chunk i's stored bytes b into dst (Decode).
func (s Source) Decode(i int, b, dst []byte) error { return Decode(s.h, i, b, dst) }

// Keep is the view's stored keep-set (View.Keep).
func (s Source) Keep() (*prune.Set, error) { return s.View.Keep() }

// Guard runs f under the view's blob file's fault guard (bloblog.File.Guard).
func (s Source) Guard(f func() error) error { return s.file.Guard(f) }
