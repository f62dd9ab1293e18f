package maint

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"errors"
	iofs "io/fs"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store/internal/bloblog"
	"github.com/kvstore/kvstore/store/internal/catalog"
)

// GarbageKind classifies what a crash or an interrupted operation may
// legitimately leave behind: bytes nothing references, which GC reclaims.
// Garbage is never an inconsistency: a store with garbage and no findings
// is healthy.
type GarbageKind string

const (
	// GarbageTail: bytes past a blob file's catalogued size, left by an
	// append whose catalog batch never committed. In the active file
	// (Reused) the next extent overwrites them; elsewhere GC rewrites the
	// file's live extents and removes it.
	GarbageTail GarbageKind = "tail"
	// GarbageFile: a blob file with no catalog record: created by a write
	// or a compaction that never committed, or retired by one that
	// committed but had not yet removed it. GC removes it.
	GarbageFile GarbageKind = "unreferenced-file"
	// GarbageRecord: the record of a blob file that is gone and held no
	// live extent. GC deletes it.
	GarbageRecord GarbageKind = "record-without-file"
)

// Garbage is one piece of reclaimable space.
type Garbage struct {
	Kind   GarbageKind
	Num    uint32 // blob file number
	File   string
	Offset uint64 // of the unreferenced bytes
	Length uint64
	// Extents is how many whole extents (trailers) the bytes hold.
	Extents int
	// Reused: the active file's tail, which the next write overwrites
	// (blob files cannot be truncated through vfs.FS).
	Reused bool
}

// CheckReport is what Check found.
type CheckReport struct {
	Files        int // catalogued blob files
	Packets      int
	SpanMemories int
	// Findings are inconsistencies: a healthy store has none.
	Findings []Finding
	// Garbage is reclaimable space (GC); it is not an inconsistency.
	Garbage      []Garbage
	GarbageBytes uint64
}

// OK reports whether Check found no inconsistency (garbage is fine).
func (r *CheckReport) OK() bool { return len(r.Findings) == 0 }

// Check checks s's catalog against its blob files without reading
// payloads; store.DB.Check documents what it finds. The caller keeps
// writers out while it runs.
func Check(ctx context.Context, s *Store, progress func(done, total int64)) (*CheckReport, error) {
	c := newChecker(s)
	defer c.close()
	if err := c.run(ctx, progress); err != nil {
		return nil, err
	}
	return c.rep, nil
}

// checker holds one Check run's state.
type checker struct {
	s       *Store
	rep     *CheckReport
	recs    map[uint32]catalog.BlobFile
	disk    map[uint32]uint64 // blob files on disk: size
	handles map[uint32]vfs.File
	uses    map[uint32][]*ExtentRef
	models  map[format.Fingerprint]bool
	indexed map[string]bool // index keys the headers want
	spans   map[string]bool // ns + "\x00" + name of every span memory
}

func newChecker(s *Store) *checker {
	return &checker{s: s, rep: &CheckReport{}, disk: map[uint32]uint64{}, handles: map[uint32]vfs.File{},
		uses: map[uint32][]*ExtentRef{}, models: map[format.Fingerprint]bool{}, indexed: map[string]bool{}, spans: map[string]bool{}}
}

func (c *checker) close() {
	for _, f := range c.handles {
		_ = f.Close()
	}
}

func (c *checker) add(f Finding) { c.rep.Findings = append(c.rep.Findings, f) }

func (c *checker) run(ctx context.Context, progress func(done, total int64)) error {
	var err error
	bad := func(b BadRecord) { c.add(RecordFinding(b)) }
	if c.recs, err = LoadRecords(c.s.Catalog.DB, bad); err != nil {
		return err
	}
	c.rep.Files = len(c.recs)
	if err := c.listDisk(); err != nil {
		return err
	}
	var total, done int64
	for _, r := range c.recs {
		total += int64(r.LiveExtents)
	}
	err = WalkRefs(c.s.Catalog.DB, func(r *ExtentRef) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := c.ref(r); err != nil {
			return err
		}
		if done++; progress != nil {
			progress(done, total)
		}
		return nil
	}, bad)
	if err != nil {
		return err
	}
	if err := c.index(); err != nil {
		return err
	}
	if err := c.files(); err != nil {
		return err
	}
	return c.sequence()
}

// listDisk records the size of every blob file in blobs/.
func (c *checker) listDisk() error {
	disk, err := DiskFiles(c.s.FS, c.s.Dir)
	if err != nil {
		return err
	}
	for num, size := range disk {
		c.disk[num] = size
	}
	return nil
}

// ParseBlobFileName parses NNNNNN.blob (at least six digits).
func ParseBlobFileName(n string) (uint32, bool) {
	var num uint32
	if _, err := fmt.Sscanf(n, "%d.blob", &num); err != nil || bloblog.FileName(num) != n {
		return 0, false
	}
	return num, true
}

// ref checks one catalogued extent.
func (c *checker) ref(r *ExtentRef) error {
	path := c.s.Path(r.File)
	if r.Span != nil {
		c.rep.SpanMemories++
		c.spans[r.Namespace+"\x00"+r.Context] = true
	} else {
		c.rep.Packets++
		c.indexed[string(catalog.IndexKey(r.Namespace, r.Header.Model, r.Header.ID))] = true
	}
	if err := c.model(r, path); err != nil {
		return err
	}
	rec, ok := c.recs[r.File]
	size, onDisk := c.disk[r.File]
	switch {
	case !ok:
		c.add(RefFinding(FindingDangling, r, path, "blob file is not catalogued"))
		return nil
	case !onDisk:
		c.add(RefFinding(FindingDangling, r, path, "blob file is missing"))
		return nil
	case r.End() < r.Offset || r.End() > rec.Size:
		c.add(RefFinding(FindingDangling, r, path, fmt.Sprintf("extent ends past the file's catalogued size %d", rec.Size)))
		return nil
	case r.End() > size:
		c.add(RefFinding(FindingDangling, r, path, fmt.Sprintf("extent ends past the file's %d bytes", size)))
		return nil
	}
	c.uses[r.File] = append(c.uses[r.File], r)
	t, err := c.readAt(r.File, r.End()-format.TrailerSize, format.TrailerSize)
	if err != nil {
		return err
	}
	if _, msg := trailerFields(t, r); msg != "" {
		c.add(RefFinding(FindingTrailer, r, path, msg))
	}
	return nil
}

// model checks that r's model spec is catalogued.
func (c *checker) model(r *ExtentRef, path string) error {
	fp := modelOf(r.Span, r.Header)
	ok, seen := c.models[fp]
	if !seen {
		var err error
		if ok, err = c.s.Catalog.Has(catalog.ModelKey(fp)); err != nil {
			return err
		}
		c.models[fp] = ok
	}
	if !ok {
		c.add(RefFinding(FindingModel, r, "", fmt.Sprintf("model spec %s is not catalogued", fp.Short())))
	}
	return nil
}

// modelOf is the model fingerprint of a span memory m, or else of h.
func modelOf(m *format.SpanMeta, h *format.PacketHeader) format.Fingerprint {
	if m != nil {
		return m.Model
	}
	return h.Model
}

// readAt reads n bytes at off of blob file num.
func (c *checker) readAt(num uint32, off, n uint64) ([]byte, error) {
	f := c.handles[num]
	if f == nil {
		var err error
		if f, err = c.s.FS.Open(c.s.Path(num)); err != nil {
			return nil, fmt.Errorf("store: open blob file %s: %w", c.s.Path(num), err)
		}
		c.handles[num] = f
	}
	b := make([]byte, n)
	if _, err := f.ReadAt(b, int64(off)); err != nil {
		return nil, fmt.Errorf("store: read blob file %s at %d: %w", c.s.Path(num), off, err)
	}
	return b, nil
}

// index checks that index entries and headers match one for one.
func (c *checker) index() error {
	err := catalog.Iterate(c.s.Catalog.DB, []byte{catalog.TagIndex}, func(k, _ []byte) error {
		if c.indexed[string(k)] {
			delete(c.indexed, string(k))
			return nil
		}
		ns, _, id, ok := catalog.ParseIndexKey(k)
		f := Finding{Kind: FindingIndex, Namespace: ns, ID: id, Layer: -1, Detail: "index entry without a header for its model"}
		if !ok {
			f.Detail = fmt.Sprintf("malformed index key %x", k)
		}
		c.add(f)
		return nil
	})
	if err != nil {
		return err
	}
	for k := range c.indexed {
		ns, _, id, _ := catalog.ParseIndexKey([]byte(k))
		c.add(Finding{Kind: FindingIndex, Namespace: ns, ID: id, Layer: -1, Detail: "header without its index entry"})
	}
	if err := c.spanHeads(); err != nil {
		return err
	}
	return c.pins()
}

// spanHeads checks that every span head record belongs to a span memory.
func (c *checker) spanHeads() error {
	return catalog.Iterate(c.s.Catalog.DB, []byte{catalog.TagSpanHead}, func(k, _ []byte) error {
		ns, rest, ok := catalog.SplitLenPrefixed(k[1:])
		name := ""
		if ok {
			name, rest, ok = catalog.SplitLenPrefixed(rest)
		}
		switch {
		case !ok || len(rest) != 4:
			c.add(Finding{Kind: FindingIndex, Layer: -1, Detail: fmt.Sprintf("malformed span head key %x", k)})
		case !c.spans[ns+"\x00"+name]:
			c.add(Finding{Kind: FindingIndex, Namespace: ns, Context: name, Layer: -1, Detail: "span head record without its span memory"})
		}
		return nil
	})
}

// pins checks that every pin names a catalogued packet.
func (c *checker) pins() error {
	return catalog.Iterate(c.s.Catalog.DB, []byte{catalog.TagPin}, func(k, _ []byte) error {
		ns, rest, ok := catalog.SplitLenPrefixed(k[1:])
		if !ok || len(rest) != len(format.PacketID{}) {
			c.add(Finding{Kind: FindingIndex, Layer: -1, Detail: fmt.Sprintf("malformed pin key %x", k)})
			return nil
		}
		found, err := c.s.Catalog.Has(catalog.HeaderKey(ns, format.PacketID(rest)))
		if err == nil && !found {
			c.add(Finding{Kind: FindingIndex, Namespace: ns, ID: [32]byte(rest), Layer: -1, Detail: "pin of a packet that is not catalogued"})
		}
		return err
	})
}

// files checks each blob file's record against its uses and its bytes,
// and lists unreferenced files.
func (c *checker) files() error {
	for _, num := range SortedKeys(c.recs) {
		if err := c.file(c.recs[num]); err != nil {
			return err
		}
	}
	for _, num := range SortedKeys(c.disk) {
		if _, ok := c.recs[num]; ok || c.s.Files.Retiring(num) {
			continue
		}
		n, err := c.countExtents(num, format.BlobHeaderSize, c.disk[num])
		if err != nil {
			return err
		}
		c.garbage(Garbage{Kind: GarbageFile, Num: num, File: c.s.Path(num), Length: c.disk[num], Extents: n})
	}
	return nil
}

func (c *checker) garbage(g Garbage) {
	c.rep.Garbage = append(c.rep.Garbage, g)
	c.rep.GarbageBytes += g.Length
}

// file checks one catalogued blob file.
func (c *checker) file(rec catalog.BlobFile) error {
	path := c.s.Path(rec.Num)
	size, onDisk := c.disk[rec.Num]
	if !onDisk {
		if rec.LiveExtents == 0 {
			c.garbage(Garbage{Kind: GarbageRecord, Num: rec.Num, File: path})
		} else {
			c.add(Finding{Kind: FindingDangling, File: path, Layer: -1, Detail: fmt.Sprintf("blob file with %d live extents is missing", rec.LiveExtents)})
		}
		return nil
	}
	c.accounting(rec, path)
	if size < rec.Size {
		c.add(Finding{Kind: FindingAccounting, File: path, Layer: -1, Detail: fmt.Sprintf("file has %d bytes, its record says %d", size, rec.Size)})
	}
	if err := c.blobHeader(rec.Num, path, size); err != nil {
		return err
	}
	if size > rec.Size {
		n, err := c.countExtents(rec.Num, rec.Size, size)
		if err != nil {
			return err
		}
		active := c.s.HasActive && c.s.Active == rec.Num
		c.garbage(Garbage{Kind: GarbageTail, Num: rec.Num, File: path, Offset: rec.Size, Length: size - rec.Size, Extents: n, Reused: active})
	}
	return nil
}

// accounting compares the record with the extents referencing the file
// and looks for overlaps.
func (c *checker) accounting(rec catalog.BlobFile, path string) {
	uses := c.uses[rec.Num]
	slices.SortFunc(uses, func(a, b *ExtentRef) int { return cmp.Compare(a.Offset, b.Offset) })
	var live uint64
	for i, r := range uses {
		live += r.Length
		if i > 0 && r.Offset < uses[i-1].End() {
			c.add(RefFinding(FindingOverlap, r, path, fmt.Sprintf("overlaps the extent of %s at %d", uses[i-1].What(), uses[i-1].Offset)))
		}
	}
	bad := func(f string, args ...any) {
		c.add(Finding{Kind: FindingAccounting, File: path, Layer: -1, Detail: fmt.Sprintf(f, args...)})
	}
	if live != rec.LiveBytes || uint64(len(uses)) != uint64(rec.LiveExtents) {
		bad("record says %d live bytes in %d extents, the catalog references %d bytes in %d", rec.LiveBytes, rec.LiveExtents, live, len(uses))
	}
	if rec.LiveBytes+rec.DeadBytes != rec.Size-format.BlobHeaderSize {
		bad("record's live %d + dead %d bytes do not fill its %d bytes after the header", rec.LiveBytes, rec.DeadBytes, rec.Size-format.BlobHeaderSize)
	}
}

// blobHeader checks a blob file's header.
func (c *checker) blobHeader(num uint32, path string, size uint64) error {
	if size < format.BlobHeaderSize {
		c.add(Finding{Kind: FindingBlobHeader, File: path, Layer: -1, Detail: fmt.Sprintf("file of %d bytes has no header", size)})
		return nil
	}
	b, err := c.readAt(num, 0, format.BlobHeaderSize)
	if err != nil {
		return err
	}
	got, err := format.DecodeBlobHeader(b)
	if err == nil && got != num {
		err = fmt.Errorf("header names file %06d", got)
	}
	if err != nil {
		c.add(Finding{Kind: FindingBlobHeader, File: path, Length: format.BlobHeaderSize, Layer: -1, Detail: err.Error()})
	}
	return nil
}

// countExtents counts the whole extents in [from, to) of file num by their
// trailers, walking forward.
func (c *checker) countExtents(num uint32, from, to uint64) (int, error) {
	n := 0
	for pos := from; pos < to; {
		found := false
		for e := pos + format.Alignment; e <= to; e += format.Alignment {
			b, err := c.readAt(num, e-format.TrailerSize, format.TrailerSize)
			if err != nil {
				return n, err
			}
			if t, err := format.DecodeTrailer(b); err == nil && t.Offset == pos {
				n, pos, found = n+1, e, true
				break
			}
		}
		if !found {
			break
		}
	}
	return n, nil
}

// sequence checks that the next-blob number is past every file.
func (c *checker) sequence() error {
	var next uint32
	found, err := c.s.Catalog.Get(catalog.KeyNextBlob, func(v []byte) (err error) {
		next, err = catalog.DecodeSequence(v)
		return err
	})
	if err != nil {
		c.add(Finding{Kind: FindingRecord, Layer: -1, Detail: fmt.Sprintf("next-blob sequence: %v", err)})
		return nil
	}
	for num := range c.recs {
		if !found || num >= next {
			c.add(Finding{Kind: FindingAccounting, Layer: -1, Detail: fmt.Sprintf("next-blob sequence %d is not past blob file %06d", next, num)})
		}
	}
	return nil
}

// SortedKeys returns m's keys in order.
func SortedKeys[V any](m map[uint32]V) []uint32 {
	ks := make([]uint32, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// DiskFiles returns the size of every NNNNNN.blob in dir. A file that
// vanishes between the listing and its Stat is left out: a retired file is
// removed by the release of its last view, which holds no lock that Check
// or GC hold.
func DiskFiles(fs vfs.FS, dir string) (map[uint32]uint64, error) {
	names, err := fs.List(dir)
	if err != nil {
		return nil, fmt.Errorf("store: list %s: %w", dir, err)
	}
	disk := map[uint32]uint64{}
	for _, n := range names {
		num, ok := ParseBlobFileName(n)
		if !ok {
			continue
		}
		st, err := fs.Stat(fs.PathJoin(dir, n))
		if errors.Is(err, iofs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("store: stat %s: %w", fs.PathJoin(dir, n), err)
		}
		disk[num] = uint64(st.Size())
	}
	return disk, nil
}
