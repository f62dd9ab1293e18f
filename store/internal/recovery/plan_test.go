package recovery

import (
	"log/slog"
	"reflect"
	"slices"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store/internal/bloblog"
	"github.com/kvstore/kvstore/store/internal/catalog"
)

// fixture is a store on a MemFS built from the package's own inputs: a
// catalog, a blobs/ directory, and blob files written extent by extent as
// Put and Delete lay them out (packet extents led by put records,
// tombstones, extents without a record, torn bytes).
type fixture struct {
	t     *testing.T
	fs    vfs.FS
	cat   *catalog.Catalog
	spec  *format.ModelSpec
	files map[uint32]vfs.File
	ends  map[uint32]uint64 // where the next extent of each file goes
	// dropped are the packets DropPacket was called for.
	dropped []format.PacketID
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	fs := vfs.NewMem()
	if err := fs.MkdirAll("blobs", 0o755); err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, fs: fs, files: map[uint32]vfs.File{}, ends: map[uint32]uint64{},
		spec: &format.ModelSpec{Architecture: "llama", Layers: 1, KVHeads: 1, HeadDim: 8, DType: format.DTypeF32,
			RoPE: format.RoPE{Style: format.RoPEInterleaved, Theta: 10000}, WeightsID: "recovery"}}
	f.openCatalog()
	t.Cleanup(func() {
		for _, file := range f.files {
			_ = file.Close()
		}
		_ = f.cat.Close()
	})
	return f
}

// openCatalog opens (or, after a rename, creates) the catalog directory.
func (f *fixture) openCatalog() {
	f.t.Helper()
	cat, err := catalog.Open("catalog", &catalog.Options{FS: f.fs, CacheSize: 1 << 20, MemTableSize: 1 << 20,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		f.t.Fatal(err)
	}
	f.cat = cat
}

func (f *fixture) path(num uint32) string { return f.fs.PathJoin("blobs", bloblog.FileName(num)) }

// store is the Store over the fixture, with the blob files now on disk.
func (f *fixture) store(full bool) *Store {
	f.t.Helper()
	disk := map[uint32]uint64{}
	for num := range f.files {
		st, err := f.fs.Stat(f.path(num))
		if err != nil {
			f.t.Fatal(err)
		}
		disk[num] = uint64(st.Size())
	}
	return &Store{Catalog: f.cat, FS: f.fs, Dir: "blobs", Disk: disk, Full: full,
		DropPacket: func(_ *pebble.Batch, ns string, id format.PacketID) {
			if ns == "ns" {
				f.dropped = append(f.dropped, id)
			}
		}}
}

// create makes blob file num, its header written.
func (f *fixture) create(num uint32) {
	f.createWith(num, format.EncodeBlobHeader(num))
}

// createWith makes blob file num holding hdr.
func (f *fixture) createWith(num uint32, hdr []byte) {
	f.t.Helper()
	file, err := f.fs.Create(f.path(num), vfs.WriteCategoryUnspecified)
	if err != nil {
		f.t.Fatal(err)
	}
	if err := bloblog.WriteAt(file, f.path(num), hdr, 0); err != nil {
		f.t.Fatal(err)
	}
	f.files[num], f.ends[num] = file, format.BlobHeaderSize
}

// put appends to file num the extent of the packet of tokens in
// namespace "ns", led by its put record of sequence seq, and returns its
// header as the catalog holds it.
func (f *fixture) put(num uint32, seq uint64, tokens ...uint32) *format.PacketHeader {
	f.t.Helper()
	id := format.ComputePacketID("ns", f.spec.Fingerprint(), "", tokens)
	return f.putAs(num, seq, id, tokens...)
}

// putAs is put with the trailer naming packet trailer (a put record that
// does not describe its extent, unless trailer is the packet's id).
func (f *fixture) putAs(num uint32, seq uint64, trailer format.PacketID, tokens ...uint32) *format.PacketHeader {
	f.t.Helper()
	fp := f.spec.Fingerprint()
	rows := uint64(len(tokens))
	lay, err := bloblog.NewLayout(2, rows*uint64(f.spec.KVHeads*f.spec.HeadDim*4))
	if err != nil {
		f.t.Fatal(err)
	}
	off := f.ends[num]
	header := func(crcs []uint32) *format.PacketHeader {
		h := &format.PacketHeader{Version: format.FormatMajor, Namespace: "ns", ID: format.ComputePacketID("ns", fp, "", tokens),
			Model: fp, Tokens: uint32(rows), TokenIDs: tokens, Layers: 1, KVHeads: 1, HeadDim: 8, DType: format.DTypeF32,
			BlobFile: num, ExtentOffset: off, ExtentLength: lay.Length, Chunks: make([]format.ChunkDesc, 2)}
		for i := range h.Chunks {
			h.Chunks[i] = format.ChunkDesc{Layer: 0, Kind: format.ChunkK + format.ChunkKind(i), DType: format.DTypeF32,
				Shape: []uint32{1, uint32(rows), 8}, Codec: format.CodecRaw, BlobFile: num, Offset: off + lay.Rel(i),
				Length: lay.Size(i), RawLength: lay.Raw, CRC32C: crcs[i]}
		}
		return h
	}
	// The put record's length does not depend on CRCs and offsets: a
	// probe measures the prefix it needs (as the store's Put does).
	if err := lay.SetPrefix(format.ChunkAlignment); err != nil {
		f.t.Fatal(err)
	}
	probe, err := format.EncodePutRecord(seq, header([]uint32{1, 1}), f.spec)
	if err != nil {
		f.t.Fatal(err)
	}
	if err := lay.SetPrefix(uint64(len(probe))); err != nil {
		f.t.Fatal(err)
	}
	chunks := make([][]byte, 2)
	for i := range chunks {
		chunks[i] = make([]byte, lay.Size(i))
		for j := range chunks[i] {
			chunks[i][j] = byte(uint64(i+j) + seq)
		}
	}
	var h *format.PacketHeader
	lead := func(crcs []uint32) ([]byte, error) {
		h = header(crcs)
		return format.EncodePutRecord(seq, h, f.spec)
	}
	if _, err := bloblog.WriteExtent(f.files[num], vfs.InvalidFd, f.path(num), off, &lay,
		func(i int) []byte { return chunks[i] }, lead, trailer); err != nil {
		f.t.Fatal(err)
	}
	f.ends[num] = off + lay.Length
	return h
}

// tombstone appends to file num the tombstone of sequence seq deleting h
// for model (h's when zero).
func (f *fixture) tombstone(num uint32, seq uint64, h *format.PacketHeader, model format.Fingerprint) {
	f.t.Helper()
	if model == (format.Fingerprint{}) {
		model = h.Model
	}
	rec, err := format.EncodeTombstone(&format.Tombstone{Seq: seq, Namespace: h.Namespace, ID: h.ID, Model: model})
	if err != nil {
		f.t.Fatal(err)
	}
	f.record(num, rec, h.ID)
}

// record appends rec to file num as the whole payload of its own extent.
func (f *fixture) record(num uint32, rec []byte, id format.PacketID) uint64 {
	f.t.Helper()
	n, err := bloblog.WriteRecordExtent(f.files[num], f.path(num), f.ends[num], rec, id)
	if err != nil {
		f.t.Fatal(err)
	}
	f.ends[num] += n
	return n
}

// bare appends an extent led by no record (as a span memory's, an
// artifact's or a format 1.0 packet's is) and returns its length.
func (f *fixture) bare(num uint32) uint64 {
	return f.record(num, []byte("not a record: some span memory block"), format.PacketID{0xee})
}

// tear appends n bytes that make no whole extent.
func (f *fixture) tear(num uint32, n int) {
	f.t.Helper()
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + 1)
	}
	if err := bloblog.WriteAt(f.files[num], f.path(num), b, f.ends[num]); err != nil {
		f.t.Fatal(err)
	}
}

// live is the record of file num holding the extents of hs, all live.
func live(num uint32, hs ...*format.PacketHeader) catalog.BlobFile {
	r := catalog.BlobFile{Num: num, Size: format.BlobHeaderSize}
	for _, h := range hs {
		r.Extents++
		r.LiveExtents++
		r.LiveBytes += h.ExtentLength
		r.Size = max(r.Size, h.ExtentOffset+h.ExtentLength)
	}
	return r
}

// catalogue commits a catalog holding the blob file records recs, the
// sequences next (blob) and seq (record), and the packets hs.
func (f *fixture) catalogue(next uint32, seq uint64, recs []catalog.BlobFile, hs ...*format.PacketHeader) {
	f.t.Helper()
	b := f.cat.DB.NewBatch()
	defer b.Close()
	for i := range recs {
		_ = b.Set(catalog.BlobFileKey(recs[i].Num), catalog.EncodeBlobFile(&recs[i]), nil)
	}
	_ = b.Set(catalog.KeyNextBlob, catalog.EncodeSequence(next), nil)
	_ = b.Set(catalog.KeyRecordSeq, format.EncodeRecordSeq(seq), nil)
	spec, err := format.EncodeModelSpec(f.spec)
	if err != nil {
		f.t.Fatal(err)
	}
	_ = b.Set(catalog.ModelKey(f.spec.Fingerprint()), spec, nil)
	for _, h := range hs {
		v, err := format.EncodeHeader(h)
		if err != nil {
			f.t.Fatal(err)
		}
		_ = b.Set(catalog.HeaderKey(h.Namespace, h.ID), v, nil)
		_ = b.Set(catalog.IndexKey(h.Namespace, h.Model, h.ID), nil, nil)
	}
	if err := f.cat.Commit(b); err != nil {
		f.t.Fatal(err)
	}
}

// header is the catalog's header of h's packet; nil when there is none.
func (f *fixture) header(h *format.PacketHeader) *format.PacketHeader {
	f.t.Helper()
	var got *format.PacketHeader
	found, err := f.cat.Get(catalog.HeaderKey(h.Namespace, h.ID), func(v []byte) (err error) {
		got, err = format.DecodeHeader(v)
		return err
	})
	if err != nil {
		f.t.Fatal(err)
	}
	if indexed, err := f.cat.Has(catalog.IndexKey(h.Namespace, h.Model, h.ID)); err != nil || indexed != found {
		f.t.Errorf("packet %s: header found %v, index entry %v (%v)", h.ID.Short(), found, indexed, err)
	}
	return got
}

// blobFile is the catalog's record of file num; false when there is none.
func (f *fixture) blobFile(num uint32) (catalog.BlobFile, bool) {
	f.t.Helper()
	var r catalog.BlobFile
	found, err := f.cat.Get(catalog.BlobFileKey(num), func(v []byte) (err error) {
		r, err = catalog.DecodeBlobFile(num, v)
		return err
	})
	if err != nil {
		f.t.Fatal(err)
	}
	return r, found
}

// sequences are the catalog's next blob file number and next record sequence.
func (f *fixture) sequences() (uint32, uint64) {
	f.t.Helper()
	var next uint32
	var seq uint64
	if _, err := f.cat.Get(catalog.KeyNextBlob, func(v []byte) (err error) {
		next, err = catalog.DecodeSequence(v)
		return err
	}); err != nil {
		f.t.Fatal(err)
	}
	if _, err := f.cat.Get(catalog.KeyRecordSeq, func(v []byte) (err error) {
		seq, err = format.DecodeRecordSeq(v)
		return err
	}); err != nil {
		f.t.Fatal(err)
	}
	return next, seq
}

func reconcile(t *testing.T, s *Store) *Plan {
	t.Helper()
	p, err := Reconcile(s)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestReconcileUpToDate: a catalog that holds every extent of its blob
// files needs nothing; nothing is scanned, and the next sequence is the
// catalog's.
func TestReconcileUpToDate(t *testing.T) {
	f := newFixture(t)
	f.create(1)
	a, b := f.put(1, 0, 1, 2), f.put(1, 1, 3)
	f.catalogue(2, 2, []catalog.BlobFile{live(1, a, b)}, a, b)
	p := reconcile(t, f.store(false))
	if r := p.Report; r.Changed() || r.Scanned != 0 || r.TornBytes != 0 || len(r.Problems) != 0 {
		t.Errorf("report %+v, want nothing", r)
	}
	if p.NextSeq() != 2 || p.NextBlob() != 2 {
		t.Errorf("next sequence %d, next blob %d; want 2 and 2", p.NextSeq(), p.NextBlob())
	}
}

// TestReconcileTails loses the catalog batches of a file's tail (a put, a
// delete of a catalogued packet, an extent without a record, a put
// replacing a catalogued packet) and of a new file (a put, then torn
// bytes): the plan counts each, and its commit leaves the catalog as the
// lost batches would have, with each file's accounting extended over its
// tail. A second reconciliation finds nothing more.
func TestReconcileTails(t *testing.T) {
	f := newFixture(t)
	f.create(1)
	a, b := f.put(1, 0, 1, 2), f.put(1, 1, 3)
	f.catalogue(2, 2, []catalog.BlobFile{live(1, a, b)}, a, b)
	c := f.put(1, 2, 4, 5, 6)
	f.tombstone(1, 3, a, format.Fingerprint{})
	tombEnd := f.ends[1]
	bare := f.bare(1)
	b2 := f.put(1, 4, 3) // b again: a newer record of the same packet
	f.create(2)
	d := f.put(2, 5, 7)
	f.tear(2, 5000)

	p := reconcile(t, f.store(false))
	want := Report{Scanned: 5, Inserted: 2, Replaced: 1, Deleted: 1, NoRecord: 1, NewFiles: 1, TornBytes: 5000}
	if r := p.Report; !reportEqual(r, want) {
		t.Errorf("report %+v, want %+v", r, want)
	}
	if p.NextSeq() != 6 || p.NextBlob() != 3 {
		t.Errorf("next sequence %d, next blob %d; want 6 and 3", p.NextSeq(), p.NextBlob())
	}
	if err := p.Commit(); err != nil {
		t.Fatal(err)
	}
	if h := f.header(a); h != nil {
		t.Errorf("deleted packet %s still catalogued", a.ID.Short())
	}
	if !slices.Equal(f.dropped, []format.PacketID{a.ID}) {
		t.Errorf("DropPacket called for %v, want the deleted packet %s only", f.dropped, a.ID.Short())
	}
	for _, want := range []*format.PacketHeader{b2, c, d} {
		got := f.header(want)
		if got == nil || got.BlobFile != want.BlobFile || got.ExtentOffset != want.ExtentOffset || !reflect.DeepEqual(got.Chunks, want.Chunks) {
			t.Errorf("packet %s: catalogued %+v, want it at %06d:%d", want.ID.Short(), got, want.BlobFile, want.ExtentOffset)
		}
	}
	// File 1: a and b killed, the tombstone and the record-less extent
	// dead (its bytes, not an extent: nothing names it), c and b2 live;
	// sealed, since file 2 was appended to after it.
	want1 := catalog.BlobFile{Num: 1, Sealed: true, Extents: 5, LiveExtents: 2, Size: f.ends[1],
		LiveBytes: c.ExtentLength + b2.ExtentLength,
		DeadBytes: a.ExtentLength + b.ExtentLength + (tombEnd - c.ExtentOffset - c.ExtentLength) + bare}
	if got, ok := f.blobFile(1); !ok || got != want1 {
		t.Errorf("file 1: %+v, want %+v", got, want1)
	}
	if got, ok := f.blobFile(2); !ok || got != live(2, d) {
		t.Errorf("file 2: %+v (%v), want %+v: the torn bytes are not catalogued", got, ok, live(2, d))
	}
	if next, seq := f.sequences(); next != 3 || seq != 6 {
		t.Errorf("catalog sequences: next blob %d, next record %d; want 3 and 6", next, seq)
	}

	p = reconcile(t, f.store(false))
	if r := p.Report; r.Changed() || r.Scanned != 0 || r.TornBytes != 5000 || len(r.Problems) != 0 {
		t.Errorf("second reconciliation: %+v, want only the torn bytes again", r)
	}
}

// TestReconcileRebuild rebuilds an empty catalog (Full) from two files, a
// third between them gone: every put is inserted and the tombstone
// applied, the next blob file number is past every file on disk, and
// GoneFiles names the missing one.
func TestReconcileRebuild(t *testing.T) {
	f := newFixture(t)
	f.create(1)
	a, b := f.put(1, 0, 1), f.put(1, 1, 2)
	f.tombstone(1, 2, a, format.Fingerprint{})
	f.create(3)
	c := f.put(3, 3, 3)
	f.create(4) // created, never written to
	f.files[4].Close()
	delete(f.files, 4)
	if err := f.fs.Remove(f.path(4)); err != nil {
		t.Fatal(err)
	}
	empty, err := f.fs.Create(f.path(4), vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	f.files[4] = empty

	s := f.store(true)
	p := reconcile(t, s)
	want := Report{Scanned: 4, Inserted: 3, Deleted: 1, NewFiles: 2}
	if r := p.Report; !reportEqual(r, want) {
		t.Errorf("report %+v, want %+v", r, want)
	}
	if p.NextBlob() != 5 || p.NextSeq() != 4 {
		t.Errorf("next blob %d, next sequence %d; want 5 (past every file on disk) and 4", p.NextBlob(), p.NextSeq())
	}
	if gone := GoneFiles(s.Disk); !slices.Equal(gone, []uint32{2}) {
		t.Errorf("gone files %v, want [2]", gone)
	}
	if err := p.Commit(); err != nil {
		t.Fatal(err)
	}
	if f.header(a) != nil || f.header(b) == nil || f.header(c) == nil {
		t.Errorf("rebuilt catalog: want b and c, a deleted")
	}
	if ok, err := f.cat.Has(catalog.ModelKey(f.spec.Fingerprint())); err != nil || !ok {
		t.Errorf("rebuilt catalog lacks the model spec (%v)", err)
	}
	if _, ok := f.blobFile(4); ok {
		t.Errorf("empty file 4 catalogued")
	}
	if r, _ := f.blobFile(3); r != live(3, c) {
		t.Errorf("file 3: %+v, want %+v", r, live(3, c))
	}
	if next, seq := f.sequences(); next != 5 || seq != 4 {
		t.Errorf("catalog sequences: next blob %d, next record %d; want 5 and 4", next, seq)
	}
}

func TestGoneFiles(t *testing.T) {
	for _, c := range []struct {
		disk []uint32
		gone []uint32
	}{
		{nil, nil},
		{[]uint32{1}, nil},
		{[]uint32{1, 2, 3}, nil},
		{[]uint32{1, 3, 5}, []uint32{2, 4}},
		{[]uint32{4}, []uint32{1, 2, 3}},
	} {
		disk := map[uint32]uint64{}
		for _, n := range c.disk {
			disk[n] = format.BlobHeaderSize
		}
		if got := GoneFiles(disk); !slices.Equal(got, c.gone) {
			t.Errorf("GoneFiles(%v) = %v, want %v", c.disk, got, c.gone)
		}
	}
}

// reportEqual compares reports, Problems included.
func reportEqual(a, b Report) bool {
	return slices.Equal(a.Problems, b.Problems) &&
		a.Scanned == b.Scanned && a.Inserted == b.Inserted && a.Replaced == b.Replaced && a.Deleted == b.Deleted &&
		a.Stale == b.Stale && a.Repointed == b.Repointed && a.NoRecord == b.NoRecord && a.NewFiles == b.NewFiles &&
		a.TornBytes == b.TornBytes
}
