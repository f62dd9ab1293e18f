package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store/internal/artifact"
	"github.com/kvstore/kvstore/store/internal/catalog"
)

// flipCounts tallies a bit-flip campaign.
type flipCounts struct {
	flips      int // bits flipped
	readErr    int // detected by a read: ErrCorruption
	structural int // not read by Get, detected by its decoder (what check scans)
	harmless   int // padding or unreferenced bytes: reads return the original tensors
	panics     int
	wrong      int // tensors returned that differ from the originals
}

func (c flipCounts) String() string {
	return fmt.Sprintf("%d flips: %d detected by reads (ErrCorruption), %d detected by their decoder, %d harmless (padding), %d panics, %d wrong tensors",
		c.flips, c.readErr, c.structural, c.harmless, c.panics, c.wrong)
}

// TestReliabilityFlipFormatFile flips every bit of each copy of the
// FORMAT file in turn: a read-only open serves every packet from the other
// copy and writes nothing; a read-write open does too and rewrites the
// flipped copy. With a bit flipped in both copies Open refuses with
// ErrCorruption naming the remedy, and RecoverFormat restores them.
func TestReliabilityFlipFormatFile(t *testing.T) {
	mem := vfs.NewMem()
	g := buildGolden(t, mem, "/db")
	good := format.EncodeFormatFile(format.Current)
	for _, name := range []string{formatFileName, formatCopyName} {
		flips := 0
		for bit := range 8 * len(good) {
			for _, readOnly := range []bool{true, false} {
				buf, err := mem.UnsafeGetFileDataBuffer("/db/" + name)
				if err != nil {
					t.Fatal(err)
				}
				buf[bit/8] ^= 1 << (bit % 8)
				flips++
				o := g.opts
				o.ReadOnly = readOnly
				db, err := openNoPanic(&o)
				switch {
				case errors.Is(err, errPanicked):
					t.Fatalf("%s bit %d flipped: %v", name, bit, err)
				case err != nil:
					t.Fatalf("%s bit %d flipped, read-only %v: %v", name, bit, readOnly, err)
				}
				if bit%37 == 0 {
					g.checkAll(t, db, fmt.Sprintf("%s bit %d flipped", name, bit))
				}
				db.Close()
				after := readMemFile(t, mem, "/db/"+name)
				if readOnly == bytes.Equal(after, good) {
					t.Fatalf("%s bit %d flipped, read-only %v: the copy now holds %x", name, bit, readOnly, after)
				}
				if readOnly {
					buf[bit/8] ^= 1 << (bit % 8) // restore it for the read-write round
				}
			}
		}
		t.Logf("%s: %d flips, each served from the other copy", name, flips)
	}
	for _, name := range []string{formatFileName, formatCopyName} {
		buf, err := mem.UnsafeGetFileDataBuffer("/db/" + name)
		if err != nil {
			t.Fatal(err)
		}
		buf[5] ^= 4
	}
	for _, readOnly := range []bool{true, false} {
		o := g.opts
		o.ReadOnly = readOnly
		db, err := openNoPanic(&o)
		if err == nil {
			db.Close()
		}
		if !errors.Is(err, ErrCorruption) || !strings.Contains(err.Error(), "kvstore recover") {
			t.Fatalf("both copies flipped, read-only %v: %v, want ErrCorruption naming kvstore recover", readOnly, err)
		}
	}
	rep, err := RecoverFormat("/db", &g.opts)
	if err != nil || !rep.Rewritten || !rep.FromBlobs || rep.Version != format.Current || rep.BlobHeaders == 0 || len(rep.Found) != 2 {
		t.Fatalf("RecoverFormat: %+v, %v", rep, err)
	}
	db := g.open(t, func(o *Options) { o.ReadOnly = true })
	defer db.Close()
	g.checkAll(t, db, "after the FORMAT campaign")
}

// readMemFile returns a copy of a file of mem.
func readMemFile(t *testing.T, mem *vfs.MemFS, path string) []byte {
	t.Helper()
	b, err := mem.UnsafeGetFileDataBuffer(path)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Clone(b)
}

var errPanicked = errors.New("panicked")

// openNoPanic is Open with a panic turned into an error wrapping errPanicked.
func openNoPanic(o *Options) (db *DB, err error) {
	defer func() {
		if r := recover(); r != nil {
			db, err = nil, fmt.Errorf("%w: %v", errPanicked, r)
		}
	}()
	return Open("/db", o)
}

// catalogEntry is one key and value of the catalog.
type catalogEntry struct{ k, v []byte }

func catalogEntries(t *testing.T, db *DB) []catalogEntry {
	var es []catalogEntry
	err := db.cat.Scan(nil, nil, func(k, v []byte) (bool, error) {
		es = append(es, catalogEntry{append([]byte(nil), k...), append([]byte(nil), v...)})
		return true, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return es
}

// TestReliabilityFlipCatalog flips every bit of every catalog value of the
// golden store (packet headers, model specs, blob file records, the
// sequence, the artifact, access statistics): each flipped value is handed
// to the decoder the store reads it with, and must be ErrCorruption; a
// sample of them is also written back through Pebble and read through the
// store's own path (Get, Headers, Model, GetArtifact), which must fail
// with ErrCorruption too. Blob file records and the sequence are read
// only by Open: a sample is checked by reopening.
func TestReliabilityFlipCatalog(t *testing.T) {
	mem := vfs.NewMem()
	g := buildGolden(t, mem, "/db")
	db := g.open(t, nil)
	defer func() { db.Close() }()
	stride := pick(41, 3)
	kinds := map[byte]*flipCounts{}
	sampled := 0
	for _, e := range catalogEntries(t, db) {
		if len(e.v) == 0 {
			continue // index entries: the key is the value
		}
		c := kinds[e.k[0]]
		if c == nil {
			c = &flipCounts{}
			kinds[e.k[0]] = c
		}
		for bit := range 8 * len(e.v) {
			v := append([]byte(nil), e.v...)
			v[bit/8] ^= 1 << (bit % 8)
			c.flips++
			err := decodeCatalogValue(e.k, e.v, v)
			if errors.Is(err, errPanicked) {
				c.panics++
			}
			if !errors.Is(err, ErrCorruption) {
				t.Fatalf("key %x (%q) bit %d flipped: decoder = %v, want ErrCorruption", e.k, e.k[:1], bit, err)
			}
			c.structural++
			if bit%stride != 0 || !readableTag(e.k[0]) {
				continue
			}
			if err := db.cat.DB.Set(e.k, v, pebble.NoSync); err != nil {
				t.Fatal(err)
			}
			sampled++
			if err := probeCatalog(db, g, e.k, bit%(8*stride) == 0); !errors.Is(err, ErrCorruption) {
				t.Fatalf("key %x (%q) bit %d flipped: store read = %v, want ErrCorruption", e.k, e.k[:1], bit, err)
			}
			c.readErr++
		}
		if err := db.cat.DB.Set(e.k, e.v, pebble.NoSync); err != nil {
			t.Fatal(err)
		}
	}
	if len(kinds) < 5 {
		t.Fatalf("catalog campaign covered %d kinds of value, want 5", len(kinds))
	}
	for tag, c := range kinds {
		t.Logf("catalog %q values: %v", tag, *c)
	}
	t.Logf("catalog: %d of the flips (every %dth bit of headers, specs, artifacts) also read through Pebble and the store", sampled, stride)
	db.models.Clear()
	g.checkAll(t, db, "after the catalog campaign")
	reopenWithFlippedRecords(t, g, db)
	db = g.open(t, nil)
	g.checkAll(t, db, "after the reopen campaign")
}

// readableTag reports whether the store has a read path of its own for
// values under tag (the others are read only by Open or by background
// work).
func readableTag(tag byte) bool {
	return tag == catalog.TagHeader || tag == catalog.TagModel || tag == catalog.TagArtifact
}

// decodeCatalogValue decodes v, the flipped value of key k (orig before
// the flip), with the decoder the store uses for k's kind; a panic is
// returned as errPanicked.
func decodeCatalogValue(k, orig, v []byte) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: %v", errPanicked, r)
		}
	}()
	switch k[0] {
	case catalog.TagHeader:
		_, err = format.DecodeHeader(v)
	case catalog.TagModel:
		_, err = format.DecodeModelSpec(v)
	case catalog.TagBlobFile:
		_, err = decodeBlobRecord(1, v)
	case catalog.TagSequence:
		_, err = decodeSequence(v)
	case catalog.TagArtifact:
		var body []byte
		if body, err = format.Unseal(format.KindArtifact, v); err == nil {
			_, err = artifact.Decode(body)
		}
	case catalog.TagAccess:
		_, _, err = decodeAccess(v)
	default:
		kind, ok := format.KindOf(orig)
		if !ok {
			return fmt.Errorf("catalog key %x holds an unframed value", k)
		}
		_, err = format.Unseal(kind, v)
	}
	return err
}

// probeCatalog reads the (flipped) value under k through the store's read
// path; it must fail. walk also walks every header (scans over Pebble's
// stacked versions of one key are slow, so only for a sample).
func probeCatalog(db *DB, g *golden, k []byte, walk bool) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: %v", errPanicked, r)
		}
	}()
	switch k[0] {
	case catalog.TagHeader:
		for i, p := range g.packets {
			if string(catalog.HeaderKey(p.Namespace, g.ids[i])) == string(k) {
				out, err := readBack(db, p, g.ids[i])
				if out != readCorrupt {
					return fmt.Errorf("Get gave %v: %v", out, err)
				}
				if walk {
					return db.Headers(func(*format.PacketHeader) error { return nil })
				}
				return err
			}
		}
	case catalog.TagModel:
		db.models.Clear()
		_, err := db.Model(format.Fingerprint(k[1:]))
		return err
	case catalog.TagArtifact:
		_, err := db.GetArtifact(g.packets[0].Model.Fingerprint(), "router-w")
		return err
	}
	return fmt.Errorf("no probe for catalog key %x", k)
}

// reopenWithFlippedRecords closes db and, for a sample of bits of every
// blob file record and of the sequence, reopens the store with the bit
// flipped: Open must refuse it with ErrCorruption.
func reopenWithFlippedRecords(t *testing.T, g *golden, db *DB) {
	var targets []catalogEntry
	for _, e := range catalogEntries(t, db) {
		if e.k[0] == catalog.TagBlobFile || e.k[0] == catalog.TagSequence {
			targets = append(targets, e)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(7, 7))
	n := 0
	for _, e := range targets {
		for range pick(4, 64) {
			bit := rng.IntN(8 * len(e.v))
			v := append([]byte(nil), e.v...)
			v[bit/8] ^= 1 << (bit % 8)
			setCatalogValue(t, g, e.k, v)
			db, err := openNoPanic(&g.opts)
			if err == nil {
				db.Close()
				t.Fatalf("key %x bit %d flipped: the store opened", e.k, bit)
			}
			if !errors.Is(err, ErrCorruption) {
				t.Fatalf("key %x bit %d flipped: Open = %v, want ErrCorruption", e.k, bit, err)
			}
			n++
		}
		setCatalogValue(t, g, e.k, e.v)
	}
	t.Logf("reopened with a flipped blob file record or sequence: %d times, all ErrCorruption", n)
}

// setCatalogValue writes one catalog value of the closed golden store.
func setCatalogValue(t *testing.T, g *golden, k, v []byte) {
	c, err := openCatalog(g.fs.PathJoin(g.dir, catalogDirName), &g.opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.DB.Set(k, v, pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
}

// blobRegion says what the byte at an offset of a blob file is.
type blobRegion int

const (
	regionHeader    blobRegion = iota // the 20 interpreted bytes of the blob header
	regionHeaderPad                   // the rest of the 4 KiB blob header
	regionChunk                       // a chunk's stored bytes
	regionPadding                     // between chunks, or between the last chunk and the trailer
	regionTrailer                     // an extent trailer
	regionFree                        // past the last catalogued extent
)

// locate returns the region of off in blob file num and the index of the
// golden packet whose extent holds it (-1 if none).
func (g *golden) locate(num uint32, off uint64) (blobRegion, int) {
	if off < format.BlobHeaderSize {
		if off < 20 {
			return regionHeader, -1
		}
		return regionHeaderPad, -1
	}
	for i, h := range g.headers {
		if h.BlobFile != num || off < h.ExtentOffset || off >= h.ExtentOffset+h.ExtentLength {
			continue
		}
		if off >= h.ExtentOffset+h.ExtentLength-format.TrailerSize {
			return regionTrailer, i
		}
		for _, c := range h.Chunks {
			if off >= c.Offset && off < c.Offset+c.Length {
				return regionChunk, i
			}
		}
		return regionPadding, i
	}
	return regionFree, -1
}

// TestReliabilityFlipBlobFiles flips bits of the golden store's blob files
// under an open DB on MemFS (whose reads copy and verify every time): every
// bit of the blob headers' interpreted bytes and of every extent trailer,
// a stride of the headers' padding, and random positions of each file.
// A flip in a chunk must make that packet's read ErrCorruption; a flip
// anywhere else must leave every tensor exact, and one in a trailer or a
// blob header's interpreted bytes must be caught by its decoder.
func TestReliabilityFlipBlobFiles(t *testing.T) {
	mem := vfs.NewMem()
	g := buildGolden(t, mem, "/db")
	db := g.open(t, nil)
	defer db.Close()
	rng := rand.New(rand.NewPCG(8, 8))
	var c flipCounts
	regions := map[blobRegion]int{}
	for _, f := range db.BlobFiles() {
		buf, err := mem.UnsafeGetFileDataBuffer(f.Path)
		if err != nil {
			t.Fatal(err)
		}
		var flips []flipAt
		every := func(off uint64) {
			for b := range 8 {
				flips = append(flips, flipAt{off, 1 << b})
			}
		}
		for off := range uint64(20) {
			every(off)
		}
		for off := uint64(20); off < format.BlobHeaderSize; off += uint64(pick(61, 1)) {
			flips = append(flips, flipAt{off, 1 << (off % 8)})
		}
		for _, h := range g.headers {
			if h.BlobFile == f.Num {
				end := h.ExtentOffset + h.ExtentLength
				for off := end - format.TrailerSize; off < end; off++ {
					every(off)
				}
			}
		}
		for range pick(400, 10000) {
			flips = append(flips, flipAt{uint64(rng.IntN(len(buf))), 1 << rng.IntN(8)})
		}
		for _, fl := range flips {
			region, pkt := g.locate(f.Num, fl.off)
			regions[region]++
			buf[fl.off] ^= fl.bit
			c.flips++
			checkBlobFlip(t, db, g, f.Num, buf, fl.off, region, pkt, &c)
			buf[fl.off] ^= fl.bit
		}
	}
	t.Logf("blob files: %v", c)
	t.Logf("flips by region: header %d, header padding %d, chunks %d, chunk padding %d, trailers %d, past the last extent %d",
		regions[regionHeader], regions[regionHeaderPad], regions[regionChunk], regions[regionPadding], regions[regionTrailer], regions[regionFree])
	g.checkAll(t, db, "after the blob file campaign")
}

// flipAt is one bit (a mask) of one byte of a file.
type flipAt struct {
	off uint64
	bit byte
}

// checkBlobFlip reads every golden packet of blob file num with one bit of
// off flipped, and counts the outcome.
func checkBlobFlip(t *testing.T, db *DB, g *golden, num uint32, buf []byte, off uint64, region blobRegion, pkt int, c *flipCounts) {
	t.Helper()
	for i, h := range g.headers {
		if h.BlobFile != num {
			continue
		}
		out, err := readBack(db, g.packets[i], g.ids[i])
		want := readExact
		if region == regionChunk && i == pkt {
			want = readCorrupt
		}
		switch {
		case out == readPanic:
			c.panics++
		case out == readWrong:
			c.wrong++
		}
		if out != want {
			t.Fatalf("blob file %d offset %d (region %d) flipped: packet %d read %v (%v), want %v", num, off, region, i, out, err, want)
		}
	}
	switch region {
	case regionChunk:
		c.readErr++
	case regionHeader:
		if _, err := format.DecodeBlobHeader(buf[:format.BlobHeaderSize]); !errors.Is(err, ErrCorruption) {
			t.Fatalf("blob file %d header byte %d flipped: DecodeBlobHeader = %v", num, off, err)
		}
		c.structural++
		if off%4 == 0 {
			requireFinding(t, db, FindingBlobHeader, fmt.Sprintf("blob file %d header byte %d flipped", num, off))
		}
	case regionTrailer:
		h := g.headers[pkt]
		end := h.ExtentOffset + h.ExtentLength
		if _, err := format.DecodeTrailer(buf[end-format.TrailerSize : end]); !errors.Is(err, ErrCorruption) {
			t.Fatalf("blob file %d trailer byte %d flipped: DecodeTrailer = %v", num, off, err)
		}
		c.structural++
		if off%16 == 0 {
			requireFinding(t, db, FindingTrailer, fmt.Sprintf("blob file %d trailer byte %d flipped", num, off))
		}
	default:
		c.harmless++
	}
}

// TestReliabilityFlipDisk flips random bits of the golden store's blob
// files on disk and reopens it each time (mmap on, then off): a flipped
// chunk is ErrCorruption, anything else reads back exact.
func TestReliabilityFlipDisk(t *testing.T) {
	g := buildGolden(t, vfs.Default, t.TempDir())
	rng := rand.New(rand.NewPCG(9, 9))
	var c flipCounts
	for i := range pick(24, 400) {
		h := g.headers[rng.IntN(len(g.headers))]
		off := h.ExtentOffset + uint64(rng.IntN(int(h.ExtentLength)))
		region, pkt := g.locate(h.BlobFile, off)
		path := g.blobPath(h.BlobFile)
		flipByte(t, vfs.Default, path, off)
		c.flips++
		db := g.open(t, func(o *Options) { o.DisableMmap = i%2 == 1 })
		for j, hj := range g.headers {
			if hj.BlobFile != h.BlobFile {
				continue
			}
			out, err := readBack(db, g.packets[j], g.ids[j])
			want := readExact
			if region == regionChunk && j == pkt {
				want = readCorrupt
			}
			if out == readWrong {
				c.wrong++
			}
			if out != want {
				t.Fatalf("flip at %s:%d (region %d): packet %d read %v (%v), want %v", path, off, region, j, out, err, want)
			}
		}
		if region == regionChunk {
			c.readErr++
		} else {
			c.harmless++
		}
		db.Close()
		flipByte(t, vfs.Default, path, off)
	}
	t.Logf("disk (mmap and copies, reopened per flip): %v", c)
}

// requireFinding runs Check and Verify and requires a finding of kind.
func requireFinding(t *testing.T, db *DB, kind FindingKind, where string) {
	t.Helper()
	cr, err := db.Check(context.Background(), CheckOptions{})
	if err != nil {
		t.Fatalf("%s: Check: %v", where, err)
	}
	vr, err := db.Verify(context.Background(), VerifyOptions{})
	if err != nil {
		t.Fatalf("%s: Verify: %v", where, err)
	}
	for _, f := range append(cr.Findings, vr.Findings...) {
		if f.Kind == kind {
			return
		}
	}
	t.Fatalf("%s: Check found %v, Verify %v; want a %s finding", where, cr.Findings, vr.Findings, kind)
}
