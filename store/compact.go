package store

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store/internal/bloblog"
	"github.com/kvstore/kvstore/store/internal/catalog"
	"github.com/kvstore/kvstore/store/internal/maint"
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
// move, decodes it against the moved root record (span_reader.go).

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

// Compact rewrites the blob files chosen by o (see CompactOptions): their
// live extents are copied to new blob files through the same write and
// fdatasync path as Put, the catalog is repointed in one synced batch, and
// the old files are removed once no View or reader maps them. Readers keep
// working throughout (a Get that races the repointing retries); writers
// wait, since Compact holds the writer lock.
//
// Span memory extents move like packets' (every resident and factor block
// verified on the way); their root and head records are re-encoded for the
// new place in the same batch, and SpanReaders opened before keep reading.
// A file with a chunk, block or trailer that fails verification, or a span
// memory head record that is missing or bad, is skipped and reported,
// never copied. Compact is crash-safe at every step and idempotent.
func (db *DB) Compact(ctx context.Context, o CompactOptions) (*CompactReport, error) {
	var rep *CompactReport
	err := db.write("compact", func() error {
		if o.LiveRatio == 0 {
			o.LiveRatio = db.opts.CompactLiveRatio
		}
		if !(o.LiveRatio > 0 && o.LiveRatio <= 1) {
			return fmt.Errorf("%w: compact: live ratio %v is not in (0, 1]", ErrInvalidArgument, o.LiveRatio)
		}
		return nil
	}, func() (err error) {
		rep, err = db.compactLocked(ctx, &o)
		return err
	})
	return rep, err
}

// compactLocked runs a compaction; the writer lock is held.
func (db *DB) compactLocked(ctx context.Context, o *CompactOptions) (*CompactReport, error) {
	c := &compaction{db: db, o: o, rep: &CompactReport{}, refs: map[uint32][]*maint.ExtentRef{}}
	c.pick()
	if len(c.sources) == 0 {
		return c.rep, nil
	}
	if err := c.gather(); err != nil {
		return nil, err
	}
	if err := c.copyAll(ctx); err != nil {
		c.abort()
		return nil, err
	}
	if err := c.commit(); err != nil {
		return nil, err
	}
	c.finish()
	return c.rep, nil
}

// compaction is one Compact run.
type compaction struct {
	db      *DB
	o       *CompactOptions
	rep     *CompactReport
	sources map[uint32]BlobFileInfo
	refs    map[uint32][]*maint.ExtentRef // per source, by offset
	total   int64
	outs    []*compactOut
	moved   []movedExtent // repointed records
	done    []uint32      // sources fully copied
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
	meta     *SpanMeta
	heads    []*HeadMeta
}

// compactOut is one output file.
type compactOut struct {
	rec  BlobFileInfo
	path string
	f    vfs.File
}

// pick chooses the source files.
func (c *compaction) pick() {
	active := uint32(0)
	if a := c.db.w.Cur; a != nil {
		active = a.Num
	}
	want := map[uint32]bool{}
	for _, n := range c.o.Files {
		want[n] = true
	}
	c.sources = map[uint32]BlobFileInfo{}
	for _, r := range c.db.BlobFiles() {
		if r.Num == active && active != 0 {
			continue
		}
		used := r.LiveBytes + r.DeadBytes
		choose := want[r.Num]
		if len(c.o.Files) == 0 {
			choose = r.DeadBytes > 0 && float64(r.LiveBytes) < c.o.LiveRatio*float64(used)
		}
		if choose {
			c.sources[r.Num] = r
		}
	}
}

// gather finds the extents of the sources, and drops sources whose record
// does not match what references them. A catalog record that does not
// decode stops the compaction: the files it may reference cannot be
// retired safely.
func (c *compaction) gather() error {
	var bad []maint.BadRecord
	err := maint.WalkRefs(c.db.cat.DB, func(r *maint.ExtentRef) error {
		if _, ok := c.sources[r.File]; ok {
			c.refs[r.File] = append(c.refs[r.File], r)
		}
		return nil
	}, func(b maint.BadRecord) { bad = append(bad, b) })
	if err != nil {
		return err
	}
	if len(bad) > 0 {
		return fmt.Errorf("%w: compact: catalog record under key %x does not decode (%v): run check", ErrCorruption, bad[0].Key, bad[0].Err)
	}
	for num, rec := range c.sources {
		rs := c.refs[num]
		slices.SortFunc(rs, func(a, b *maint.ExtentRef) int { return maint.CmpU64(a.Offset, b.Offset) })
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

func (c *compaction) skip(num uint32, why string) {
	delete(c.sources, num)
	c.rep.Skipped = append(c.rep.Skipped, SkippedFile{Num: num, Reason: why})
}

// copyAll copies every source's extents, in file order.
func (c *compaction) copyAll(ctx context.Context) error {
	for _, num := range maint.SortedKeys(c.sources) {
		if err := c.copyFile(ctx, num); err != nil {
			return err
		}
	}
	if len(c.outs) == 0 {
		return nil
	}
	for _, out := range c.outs {
		if err := timed(&c.db.st.blobSyncs, &c.db.st.blobSyncNanos, out.f.SyncData); err != nil {
			return fmt.Errorf("store: sync blob file %s: %w", out.path, err)
		}
	}
	return bloblog.SyncDir(c.db.fs, c.db.w.Dir)
}

// copyFile copies one source's extents. An extent that fails
// verification leaves the source alone: what was copied of it becomes
// dead bytes of the output.
func (c *compaction) copyFile(ctx context.Context, num uint32) error {
	f := c.db.file(num)
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
func (c *compaction) discard(ms []movedExtent, n uint64) {
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
func (c *compaction) copyExtent(f *bloblog.File, r *maint.ExtentRef) (movedExtent, string, error) {
	var heads []*HeadMeta
	var rs []maint.Region
	if r.Span != nil {
		var bad string
		var err error
		if heads, bad, err = c.spanHeads(r); err != nil || bad != "" {
			return movedExtent{}, bad, err
		}
		rs = maint.SpanRegions(r.Span, heads)
	} else {
		rs = maint.PacketRegions(r.Header)
	}
	var buf []byte
	b, err := maint.ReadExtent(f, r, &buf)
	if errors.Is(err, ErrCorruption) {
		return movedExtent{}, err.Error(), nil
	}
	if err != nil {
		return movedExtent{}, "", err
	}
	if bad := maint.CheckRegions(b, r, rs); bad != "" {
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
	c.db.st.bytesWritten.Add(r.Length)
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
		m.header = repoint(r.Header, out.rec.Num, off)
	}
	return m, "", nil
}

// spanHeads reads span memory r's head records (the writer lock keeps
// them as they are), or says which is missing or bad.
func (c *compaction) spanHeads(r *maint.ExtentRef) ([]*HeadMeta, string, error) {
	m := r.Span
	heads := make([]*HeadMeta, 0, m.Layers*m.KVHeads)
	for l := range m.Layers {
		for h := range m.KVHeads {
			var hm *HeadMeta
			found, err := c.db.cat.Get(catalog.SpanHeadKey(r.Namespace, r.Context, l, h), func(v []byte) (err error) {
				hm, err = decodeHeadMeta(v, m)
				return err
			})
			switch {
			case err != nil && !errors.Is(err, ErrCorruption):
				return nil, "", err
			case err != nil || !found || hm.Layer != l || hm.Head != h:
				return nil, fmt.Sprintf("layer %d head %d record missing or bad (%v): run check", l, h, err), nil
			}
			heads = append(heads, hm)
		}
	}
	return heads, "", nil
}

// repoint returns a copy of h with its extent at off of file num.
func repoint(h *format.PacketHeader, num uint32, off uint64) *format.PacketHeader {
	n := *h
	n.Chunks = slices.Clone(h.Chunks)
	for i := range n.Chunks {
		n.Chunks[i].BlobFile = num
		n.Chunks[i].Offset = n.Chunks[i].Offset - h.ExtentOffset + off
	}
	n.BlobFile, n.ExtentOffset = num, off
	return &n
}

// output returns the output file an extent of n bytes goes to, starting a
// new one when the current one would grow past the seal size.
func (c *compaction) output(n uint64) (*compactOut, error) {
	if k := len(c.outs); k > 0 {
		out := c.outs[k-1]
		if out.rec.Size == format.BlobHeaderSize || out.rec.Size+n <= uint64(c.db.opts.BlobFileSize) {
			return out, nil
		}
	}
	num := c.db.w.Next + uint32(len(c.outs))
	out := &compactOut{rec: BlobFileInfo{Num: num, Size: format.BlobHeaderSize, Sealed: true}, path: blobPath(c.db, num)}
	f, err := c.db.fs.Create(out.path, vfs.WriteCategoryUnspecified)
	if err != nil {
		return nil, fmt.Errorf("store: create blob file %s: %w", out.path, err)
	}
	out.f = f
	c.outs = append(c.outs, out)
	return out, bloblog.WriteAt(f, out.path, format.EncodeBlobHeader(num), 0)
}

// abort removes the outputs of a compaction that will not commit.
func (c *compaction) abort() {
	for _, out := range c.outs {
		_ = out.f.Close()
		_ = c.db.fs.Remove(out.path)
	}
}

// commit repoints the catalog in one synced batch.
func (c *compaction) commit() error {
	b := c.db.cat.DB.NewBatch()
	defer b.Close()
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
		_ = b.Set(catalog.BlobFileKey(out.rec.Num), encodeBlobRecord(&out.rec), nil)
		c.db.addFile(out.rec)
	}
	if len(c.outs) > 0 {
		_ = b.Set(catalog.KeyNextBlob, encodeSequence(c.outs[len(c.outs)-1].rec.Num+1), nil)
	}
	if err := c.db.commit(b); err != nil {
		for _, out := range c.outs {
			_ = out.f.Close()
			c.db.dropFile(out.rec.Num)
		}
		return fmt.Errorf("compact: %w", err)
	}
	return nil
}

// finish installs the committed state and retires the sources.
func (c *compaction) finish() {
	for _, out := range c.outs {
		_ = out.f.Close()
		c.db.setRecords(out.rec)
		c.rep.Created = append(c.rep.Created, out.rec.Num)
	}
	if len(c.outs) > 0 {
		c.db.w.Next = c.outs[len(c.outs)-1].rec.Num + 1
	}
	for _, num := range c.done {
		rec := c.sources[num]
		c.rep.BytesReclaimed += rec.Size - rec.LiveBytes
		c.rep.Rewritten = append(c.rep.Rewritten, num)
		c.db.retire(num)
	}
	if len(c.rep.Rewritten) > 0 {
		c.db.st.compactions.Add(1)
	}
	c.db.st.compactedBytes.Add(c.rep.BytesCopied)
	c.db.st.reclaimedBytes.Add(c.rep.BytesReclaimed)
	c.db.logCompaction(c.rep)
	for _, m := range c.moved {
		if h := m.header; h != nil {
			c.db.publish(Event{Kind: EventCompacted, Namespace: h.Namespace, Model: h.Model, ID: h.ID})
		}
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
