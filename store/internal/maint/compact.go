package maint

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store/internal/bloblog"
	"github.com/kvstore/kvstore/store/internal/catalog"
)

// Compaction rewrites blob files that are mostly dead:
//
//	writer lock -> walk the catalog for the extents of the chosen files
//	-> copy each live extent to new output files (numbers from the
//	   next-blob sequence), verifying every chunk and the trailer on the
//	   way and rewriting the trailer's offset
//	-> fdatasync the outputs, sync blobs/
//	-> ONE synced batch: every moved header repointed (for a span memory,
//	   its root record and every head record re-encoded for the new
//	   place), the sources' records deleted, the outputs' records (sealed)
//	   and the sequence
//	-> sources retired: removed once no view maps them.
//
// A crash before the batch leaves output files with no record (garbage:
// Check lists them, GC or the next file creation removes them) and the
// catalog as it was. A crash after it leaves source files with no record
// (the same garbage). Either way every header points at synced bytes that
// verify, so Check finds nothing and every packet reads back. Compaction
// is idempotent: run again, it only finds what is still below the ratio.
//
// A span memory's blocks sit at offsets relative to its extent, so its
// copy is byte-for-byte (the trailer's offset excepted) and only the
// records' (blob file, extent offset) change. A SpanReader opened before
// keeps its pinned source file and, reading a head record first after the
// move, decodes it against the moved root record (spanmem/reader.go).

// CompactOptions tune Compact. The zero value uses the store's options.
type CompactOptions struct {
	// LiveRatio: blob files other than the active one whose live bytes are
	// below this fraction of their extent bytes are rewritten (files with
	// no live byte are simply removed). 0 means Options.CompactLiveRatio;
	// 1 rewrites every file with a dead byte.
	LiveRatio float64
	// Files, when not empty, are rewritten whatever their ratio (the active
	// file excepted); LiveRatio is then ignored.
	Files []uint32
	// Progress, if not nil, is called after each extent copied with the
	// bytes copied and the bytes to copy.
	Progress func(done, total int64)
	// DryRun reports what would be done (the files chosen, as Rewritten,
	// with the bytes their live extents hold as BytesCopied and the rest
	// as BytesReclaimed, and what would be skipped) and writes nothing.
	DryRun bool
}

// CompactReport says what Compact did.
type CompactReport struct {
	Rewritten      []uint32 // source files retired (removed once no view maps them)
	Created        []uint32 // output files
	Extents        int      // extents moved
	BytesCopied    uint64
	BytesReclaimed uint64 // of the retired files: their size minus what was copied
	Skipped        []SkippedFile
}

// SkippedFile is a file Compact chose but left alone, and why.
type SkippedFile struct {
	Num    uint32
	Reason string
}

// NewCompaction prepares a compaction of s's blob files recs (every
// catalogued one) as o chooses; next is the next blob file number (the
// outputs take next, next+1, ...) and fileSize the seal size. The caller
// holds the writer lock until Finish.
func NewCompaction(s *Store, o *CompactOptions, recs []catalog.BlobFile, next uint32, fileSize uint64) *Compaction {
	c := &Compaction{s: s, o: o, rep: &CompactReport{}, refs: map[uint32][]*ExtentRef{}, recs: recs, next: next, fileSize: fileSize}
	c.pick()
	return c
}

// Report is what the compaction did so far.
func (c *Compaction) Report() *CompactReport { return c.rep }

// Empty reports that no source was chosen: nothing to do.
func (c *Compaction) Empty() bool { return len(c.sources) == 0 }

// Run finds the sources' extents and copies them to the outputs, synced.
// On an error it removes the outputs.
func (c *Compaction) Run(ctx context.Context) error {
	if err := c.gather(); err != nil {
		return err
	}
	if err := c.copyAll(ctx); err != nil {
		c.abort()
		return err
	}
	return nil
}

// Batch adds to b every moved record repointed, the sources' records
// deleted, the outputs' records and the next-blob sequence. On an error
// it removes the outputs.
func (c *Compaction) Batch(b *pebble.Batch) error {
	for _, m := range c.moved {
		if err := m.repoint(b); err != nil {
			c.abort()
			return fmt.Errorf("store: compact: %w", err)
		}
	}
	for _, num := range c.done {
		_ = b.Delete(catalog.BlobFileKey(num), nil)
	}
	for _, out := range c.outs {
		_ = b.Set(catalog.BlobFileKey(out.rec.Num), catalog.EncodeBlobFile(&out.rec), nil)
	}
	if len(c.outs) > 0 {
		_ = b.Set(catalog.KeyNextBlob, catalog.EncodeSequence(c.outs[len(c.outs)-1].rec.Num+1), nil)
	}
	return nil
}

// Outputs are the output files' records.
func (c *Compaction) Outputs() []catalog.BlobFile {
	rs := make([]catalog.BlobFile, len(c.outs))
	for i, out := range c.outs {
		rs[i] = out.rec
	}
	return rs
}

// Close closes the outputs' handles (the files stay).
func (c *Compaction) Close() {
	for _, out := range c.outs {
		_ = out.f.Close()
	}
}

// Finish completes the report once the batch committed and returns the
// sources to retire.
func (c *Compaction) Finish() (retire []uint32) {
	for _, out := range c.outs {
		c.rep.Created = append(c.rep.Created, out.rec.Num)
	}
	for _, num := range c.done {
		rec := c.sources[num]
		c.rep.BytesReclaimed += rec.Size - rec.LiveBytes
		c.rep.Rewritten = append(c.rep.Rewritten, num)
	}
	return c.done
}

// Moved are the headers of the packets moved, repointed.
func (c *Compaction) Moved() []*format.PacketHeader {
	var hs []*format.PacketHeader
	for _, m := range c.moved {
		if m.header != nil {
			hs = append(hs, m.header)
		}
	}
	return hs
}

// Compaction is one Compact run: NewCompaction picks the sources, Run
// copies them, Batch repoints the catalog, and the caller, once the batch
// committed, calls Finish and retires what it returns.
type Compaction struct {
	s        *Store
	o        *CompactOptions
	rep      *CompactReport
	sources  map[uint32]catalog.BlobFile
	refs     map[uint32][]*ExtentRef // per source, by offset
	total    int64
	recs     []catalog.BlobFile // every catalogued blob file
	next     uint32             // the next blob file number
	fileSize uint64             // seal size of an output
	outs     []*compactOut
	moved    []movedExtent // repointed records
	done     []uint32      // sources fully copied
}

// movedExtent is one copied extent and its repointed records: a packet's
// header or a span memory's root and head records.
type movedExtent struct {
	file   uint32 // output file
	length uint64
	header *format.PacketHeader
	span   *movedSpan
}

// movedSpan is a span memory's records for its new place.
type movedSpan struct {
	ns, name string
	meta     *format.SpanMeta
	heads    []*format.HeadMeta
}

// compactOut is one output file.
type compactOut struct {
	rec  catalog.BlobFile
	path string
	f    vfs.File
}

// pick chooses the source files.
func (c *Compaction) pick() {
	active := uint32(0)
	if c.s.HasActive {
		active = c.s.Active
	}
	want := map[uint32]bool{}
	for _, n := range c.o.Files {
		want[n] = true
	}
	c.sources = map[uint32]catalog.BlobFile{}
	for _, r := range c.recs {
		used := r.LiveBytes + r.DeadBytes
		choose := want[r.Num]
		delete(want, r.Num)
		if len(c.o.Files) == 0 {
			choose = r.DeadBytes > 0 && float64(r.LiveBytes) < c.o.LiveRatio*float64(used)
		}
		switch {
		case choose && r.Num == active && active != 0:
			c.rep.Skipped = append(c.rep.Skipped, SkippedFile{Num: r.Num, Reason: "the active file (writes append to it)"})
		case choose:
			c.sources[r.Num] = r
		}
	}
	for _, n := range SortedKeys(want) {
		c.rep.Skipped = append(c.rep.Skipped, SkippedFile{Num: n, Reason: "no such blob file in the catalog"})
	}
}

// Sources are the files chosen, in file number order.
func (c *Compaction) Sources() []catalog.BlobFile {
	rs := make([]catalog.BlobFile, 0, len(c.sources))
	for _, n := range SortedKeys(c.sources) {
		rs = append(rs, c.sources[n])
	}
	return rs
}

// gather finds the extents of the sources, and drops sources whose record
// does not match what references them. A catalog record that does not
// decode stops the compaction: the files it may reference cannot be
// retired safely.
func (c *Compaction) gather() error {
	var bad []BadRecord
	err := WalkRefs(c.s.Catalog.DB, func(r *ExtentRef) error {
		if _, ok := c.sources[r.File]; ok {
			c.refs[r.File] = append(c.refs[r.File], r)
		}
		return nil
	}, func(b BadRecord) { bad = append(bad, b) })
	if err != nil {
		return err
	}
	if len(bad) > 0 {
		return fmt.Errorf("%w: compact: catalog record under key %x does not decode (%v): run check", format.ErrCorruption, bad[0].Key, bad[0].Err)
	}
	for num, rec := range c.sources {
		rs := c.refs[num]
		slices.SortFunc(rs, func(a, b *ExtentRef) int { return cmp.Compare(a.Offset, b.Offset) })
		var live uint64
		for _, r := range rs {
			live += r.Length
		}
		switch {
		case live != rec.LiveBytes || len(rs) != int(rec.LiveExtents):
			c.skip(num, fmt.Sprintf("record says %d live bytes in %d extents, the catalog references %d in %d: run check",
				rec.LiveBytes, rec.LiveExtents, live, len(rs)))
		default:
			c.total += int64(live)
		}
	}
	return nil
}

func (c *Compaction) skip(num uint32, why string) {
	delete(c.sources, num)
	c.rep.Skipped = append(c.rep.Skipped, SkippedFile{Num: num, Reason: why})
}

// copyAll copies every source's extents, in file order.
func (c *Compaction) copyAll(ctx context.Context) error {
	for _, num := range SortedKeys(c.sources) {
		if err := c.copyFile(ctx, num); err != nil {
			return err
		}
	}
	if len(c.outs) == 0 {
		return nil
	}
	for _, out := range c.outs {
		if err := c.s.syncData(out.f); err != nil {
			return fmt.Errorf("store: sync blob file %s: %w", out.path, err)
		}
	}
	return bloblog.SyncDir(c.s.FS, c.s.Dir)
}

// copyFile copies one source's extents. An extent that fails
// verification leaves the source alone: what was copied of it becomes
// dead bytes of the output.
func (c *Compaction) copyFile(ctx context.Context, num uint32) error {
	f := c.s.Files.File(num)
	if f == nil {
		c.skip(num, "not in the registry")
		return nil
	}
	defer f.Release()
	moved := len(c.moved)
	var copied uint64
	for _, r := range c.refs[num] {
		if err := ctx.Err(); err != nil {
			return err
		}
		m, bad, err := c.copyExtent(f, r)
		if err != nil {
			return err
		}
		if bad != "" {
			c.discard(c.moved[moved:], copied)
			c.moved = c.moved[:moved]
			c.skip(num, fmt.Sprintf("extent of %s at %d: %s", r.What(), r.Offset, bad))
			return nil
		}
		c.moved = append(c.moved, m)
		copied += r.Length
		c.rep.BytesCopied += r.Length
		if c.o.Progress != nil {
			c.o.Progress(int64(c.rep.BytesCopied), c.total)
		}
	}
	c.rep.Extents += len(c.refs[num])
	c.done = append(c.done, num)
	return nil
}

// discard turns the copies of a skipped source into dead bytes.
func (c *Compaction) discard(ms []movedExtent, n uint64) {
	for _, m := range ms {
		for _, out := range c.outs {
			if out.rec.Num == m.file {
				out.rec.LiveBytes -= m.length
				out.rec.DeadBytes += m.length
				out.rec.LiveExtents--
			}
		}
	}
	c.rep.BytesCopied -= n
}

// copyExtent verifies r's extent in f and appends it to an output. It
// returns the repointed records, or why the extent failed verification.
func (c *Compaction) copyExtent(f *bloblog.File, r *ExtentRef) (movedExtent, string, error) {
	var heads []*format.HeadMeta
	var rs []Region
	if r.Span != nil {
		var bad string
		var err error
		if heads, bad, err = c.spanHeads(r); err != nil || bad != "" {
			return movedExtent{}, bad, err
		}
		rs = SpanRegions(r.Span, heads)
	} else {
		rs = PacketRegions(r.Header)
	}
	var buf []byte
	b, err := ReadExtent(f, r, &buf)
	if errors.Is(err, format.ErrCorruption) {
		return movedExtent{}, err.Error(), nil
	}
	if err != nil {
		return movedExtent{}, "", err
	}
	var bad string
	err = f.Guard(func() error { bad = CheckRegions(b, r, rs); return nil })
	if errors.Is(err, format.ErrCorruption) {
		return movedExtent{}, err.Error(), nil
	}
	if err != nil {
		return movedExtent{}, "", err
	}
	if bad != "" {
		return movedExtent{}, bad, nil
	}
	out, err := c.output(r.Length)
	if err != nil {
		return movedExtent{}, "", err
	}
	off := out.rec.Size
	t, _ := format.DecodeTrailer(b[len(b)-format.TrailerSize:])
	t.Offset = off
	body := b[:len(b)-format.TrailerSize]
	if err := bloblog.WriteAt(out.f, out.path, body, off); err != nil {
		return movedExtent{}, "", err
	}
	if err := bloblog.WriteAt(out.f, out.path, t.Encode(), off+uint64(len(body))); err != nil {
		return movedExtent{}, "", err
	}
	c.s.wrote(r.Length)
	out.rec.Size += r.Length
	out.rec.LiveBytes += r.Length
	out.rec.Extents++
	out.rec.LiveExtents++
	m := movedExtent{file: out.rec.Num, length: r.Length}
	if r.Span != nil {
		meta := *r.Span
		meta.BlobFile, meta.ExtentOffset = out.rec.Num, off
		m.span = &movedSpan{ns: r.Namespace, name: r.Context, meta: &meta, heads: heads}
	} else {
		m.header = r.Header.Moved(out.rec.Num, off)
	}
	return m, "", nil
}

// spanHeads reads span memory r's head records (the writer lock keeps
// them as they are), or says which is missing or bad.
func (c *Compaction) spanHeads(r *ExtentRef) ([]*format.HeadMeta, string, error) {
	m := r.Span
	heads := make([]*format.HeadMeta, 0, m.Layers*m.KVHeads)
	for l := range m.Layers {
		for h := range m.KVHeads {
			var hm *format.HeadMeta
			found, err := c.s.Catalog.Get(catalog.SpanHeadKey(r.Namespace, r.Context, l, h), func(v []byte) (err error) {
				hm, err = format.DecodeHeadMeta(v, m)
				return err
			})
			switch {
			case err != nil && !errors.Is(err, format.ErrCorruption):
				return nil, "", err
			case err != nil || !found || hm.Layer != l || hm.Head != h:
				return nil, fmt.Sprintf("layer %d head %d record missing or bad (%v): run check", l, h, err), nil
			}
			heads = append(heads, hm)
		}
	}
	return heads, "", nil
}

// output returns the output file an extent of n bytes goes to, starting a
// new one when the current one would grow past the seal size.
func (c *Compaction) output(n uint64) (*compactOut, error) {
	if k := len(c.outs); k > 0 {
		out := c.outs[k-1]
		if out.rec.Size == format.BlobHeaderSize || out.rec.Size+n <= uint64(c.fileSize) {
			return out, nil
		}
	}
	num := c.next + uint32(len(c.outs))
	out := &compactOut{rec: catalog.BlobFile{Num: num, Size: format.BlobHeaderSize, Sealed: true}, path: c.s.Path(num)}
	f, err := c.s.FS.Create(out.path, vfs.WriteCategoryUnspecified)
	if err != nil {
		return nil, fmt.Errorf("store: create blob file %s: %w", out.path, err)
	}
	out.f = f
	c.outs = append(c.outs, out)
	return out, bloblog.WriteAt(f, out.path, format.EncodeBlobHeader(num), 0)
}

// abort removes the outputs of a compaction that will not commit.
func (c *Compaction) abort() {
	for _, out := range c.outs {
		_ = out.f.Close()
		_ = c.s.FS.Remove(out.path)
	}
}

// repoint adds m's records for its new place to b; encoding validates
// them.
func (m *movedExtent) repoint(b *pebble.Batch) error {
	if h := m.header; h != nil {
		v, err := format.EncodeHeader(h)
		if err != nil {
			return fmt.Errorf("packet %s: %w", h.ID.Short(), err)
		}
		return b.Set(catalog.HeaderKey(h.Namespace, h.ID), v, nil)
	}
	s := m.span
	v, err := s.meta.Encode()
	if err != nil {
		return fmt.Errorf("span memory %q: %w", s.name, err)
	}
	_ = b.Set(catalog.SpanMetaKey(s.ns, s.name), v, nil)
	for _, h := range s.heads {
		hv, err := h.Encode(s.meta)
		if err != nil {
			return fmt.Errorf("span memory %q layer %d head %d: %w", s.name, h.Layer, h.Head, err)
		}
		_ = b.Set(catalog.SpanHeadKey(s.ns, s.name, h.Layer, h.Head), hv, nil)
	}
	return nil
}

// Debt is the dead bytes of the files among recs (every catalogued one)
// that a compaction at liveRatio would rewrite. The active file is taken
// to be the highest numbered unsealed one (Stats does not wait for the
// writer lock).
func Debt(recs []catalog.BlobFile, liveRatio float64) uint64 {
	active := uint32(0)
	for _, r := range recs {
		if !r.Sealed {
			active = r.Num
		}
	}
	var debt uint64
	for _, r := range recs {
		used := r.LiveBytes + r.DeadBytes
		if r.Num != active && r.DeadBytes > 0 && float64(r.LiveBytes) < liveRatio*float64(used) {
			debt += r.DeadBytes
		}
	}
	return debt
}
