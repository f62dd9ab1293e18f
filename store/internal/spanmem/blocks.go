package spanmem

import (
	"fmt"
	"slices"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store/internal/bloblog"
)

// Counters receives what Blocks reads, for the store's statistics.
type Counters interface {
	Read(n uint64)     // bytes handed out
	Verified(n uint64) // bytes checked against a CRC32C
	Corrupt()          // a block failed its CRC32C
}

// Blocks reads one stored span memory's blocks (a layer's resident rows,
// a span's K or V factors of one head) from its blob file, each verified
// against its CRC32C. The caller holds a reference on the file for as long
// as it uses Blocks, and serialises Read against Drop.
type Blocks struct {
	name   string
	meta   *format.SpanMeta
	file   *bloblog.File
	extent []byte // the mapped extent; nil when reads copy
	verify bool
	c      Counters
}

// NewBlocks reads memory name's blocks, rooted at m, from f; verify
// checks every block's CRC32C (a mapped block only once: the file
// remembers it).
func NewBlocks(name string, m *format.SpanMeta, f *bloblog.File, verify bool, c Counters) (*Blocks, error) {
	extent, err := f.Span(m.ExtentOffset, m.ExtentLength)
	if err != nil {
		return nil, fmt.Errorf("span memory %q: %w", name, err)
	}
	return &Blocks{name: name, meta: m, file: f, extent: extent, verify: verify, c: c}, nil
}

// Drop forgets the mapping: the caller is releasing the file.
func (b *Blocks) Drop() { b.extent = nil }

// Read returns [off, off+n) of the extent (offsets relative to it),
// verified against crc: aliasing the mapping when dst is nil and the file is
// mapped, else copied into dst (allocated when nil). what names the block
// in errors.
func (b *Blocks) Read(dst []byte, off, n uint64, crc uint32, what func() string) ([]byte, error) {
	abs := b.meta.ExtentOffset + off
	var out []byte
	if b.extent != nil {
		out = b.extent[off : off+n : off+n]
		if b.verify && !b.file.IsVerified(abs, crc) {
			if err := b.file.Guard(func() error { return b.check(out, abs, crc, what) }); err != nil {
				return nil, err
			}
			b.file.MarkVerified(abs, crc)
		}
		if dst != nil {
			if err := b.file.Guard(func() error { out = dst[:copy(dst, out)]; return nil }); err != nil {
				return nil, fmt.Errorf("span memory %q %s: %w", b.name, what(), err)
			}
		}
	} else {
		if dst == nil {
			dst = make([]byte, n)
		}
		out = dst[:n]
		if err := b.file.ReadAt(out, abs); err != nil {
			return nil, fmt.Errorf("span memory %q %s: %w", b.name, what(), err)
		}
		if b.verify {
			if err := b.check(out, abs, crc, what); err != nil {
				return nil, err
			}
		}
	}
	b.c.Read(n)
	return out, nil
}

// check verifies p against crc, counting the bytes checked.
func (b *Blocks) check(p []byte, abs uint64, crc uint32, what func() string) error {
	b.c.Verified(uint64(len(p)))
	if got := format.CRC(p); got != crc {
		b.c.Corrupt()
		return fmt.Errorf("%w: blob file %s offset %d (%d bytes): span memory %q (%s) %s: crc32c %08x, computed %08x",
			format.ErrCorruption, b.file.Path(), abs, len(p), b.name, b.meta.Context.Short(), what(), crc, got)
	}
	return nil
}

// CheckHead refuses a (layer, KV head) outside memory m.
func CheckHead(m *format.SpanMeta, layer, head int) error {
	if layer < 0 || layer >= m.Layers || head < 0 || head >= m.KVHeads {
		return fmt.Errorf("%w: layer %d head %d of a %dx%d span memory", ErrInvalidArgument, layer, head, m.Layers, m.KVHeads)
	}
	return nil
}

// FactorBlock returns, from head record h of memory m, the block of span's
// K or V factors; ErrInvalidArgument for a span out of range, one that is
// not factored (its rows are resident) or another chunk kind.
func FactorBlock(m *format.SpanMeta, h *format.HeadMeta, span int, kind format.ChunkKind) (format.FactorBlock, error) {
	switch {
	case span < 0 || span >= len(m.Spans):
		return format.FactorBlock{}, fmt.Errorf("%w: span %d of %d", ErrInvalidArgument, span, len(m.Spans))
	case !m.Spans[span].Factored:
		return format.FactorBlock{}, fmt.Errorf("%w: span %d is not factored: its rows are resident", ErrInvalidArgument, span)
	case kind == format.ChunkK:
		return h.K[span], nil
	case kind == format.ChunkV:
		return h.V[span], nil
	}
	return format.FactorBlock{}, fmt.Errorf("%w: chunk kind %v", ErrInvalidArgument, kind)
}

// SameWrite reports whether root record m is the write o was read from,
// possibly at another place (moved by compaction): same context, creation
// time, extent length, spans and resident blocks.
func SameWrite(o, m *format.SpanMeta) bool {
	return m.Context == o.Context && m.CreatedUnixNs == o.CreatedUnixNs && m.ExtentLength == o.ExtentLength &&
		len(m.Spans) == len(o.Spans) && slices.Equal(m.Blocks, o.Blocks)
}

// Positions are the target positions of span sp's rows for a context at
// base: base+Start .. base+End-1.
func Positions(sp format.Span, base int64) []int64 {
	pos := make([]int64, sp.Len())
	for i := range pos {
		pos[i] = base + int64(sp.Start+i)
	}
	return pos
}
