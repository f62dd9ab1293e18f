package store

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store/internal/bloblog"
	"github.com/kvstore/kvstore/store/internal/catalog"
	"github.com/kvstore/kvstore/store/internal/maint"
)

// ReconcileReport says what Open (or Recover) found in the blob log that
// the catalog did not hold, and what it did about it (docs/format.md,
// "Rebuilding the catalog").
type ReconcileReport struct {
	Scanned   int // whole extents read past the catalogued ends of the blob files
	Inserted  int // packets re-inserted from their put records
	Replaced  int // catalogued packets a newer put record replaced
	Deleted   int // catalogued (or re-inserted) packets a tombstone deleted
	Stale     int // records older than the catalog's sequence (copies, already applied)
	Repointed int // catalogued packets whose blob file is gone, repointed to a copy compaction made
	NoRecord  int // extents without a record (span memories, artifacts, packets of format 1.0): not rebuilt
	NewFiles  int // blob files the catalog did not list, now catalogued
	TornBytes uint64
	// Problems are records that contradict the catalog or each other; each
	// was left out, and is named here.
	Problems []string
}

// Changed reports whether the catalog needed a change.
func (r *ReconcileReport) Changed() bool {
	return r.Inserted+r.Replaced+r.Deleted+r.Repointed+r.NewFiles > 0
}

// tailRecord is one put record or tombstone found in a blob file's tail.
type tailRecord struct {
	num       uint32
	off, n    uint64
	seq       uint64
	put       *format.PacketHeader // repointed to where the extent is
	spec      *format.ModelSpec
	tomb      *format.Tombstone
	applied   bool // changed the catalog (its end counts)
	duplicate bool
}

func (t *tailRecord) key() string {
	if t.put != nil {
		return string(catalog.HeaderKey(t.put.Namespace, t.put.ID))
	}
	return string(catalog.HeaderKey(t.tomb.Namespace, t.tomb.ID))
}

// entryState is a packet's catalog entry as the reconciliation goes: from
// the catalog (rec nil) or from a tail record.
type entryState struct {
	h   *format.PacketHeader // nil: deleted
	rec *tailRecord
}

// reconciler compares the blob log with a catalog: it reads every blob
// file's bytes past its catalogued size (every file from its header when
// full), and applies, in sequence order, the put records and tombstones
// newer than the catalog's next-record sequence.
type reconciler struct {
	fs   vfs.FS
	dir  string // blobs/
	cat  *catalog.Catalog
	full bool

	seq      uint64                  // the catalog's next-record sequence
	next     uint32                  // the catalog's next blob file number
	lastDisk uint32                  // the highest numbered blob file on disk
	recs     map[uint32]BlobFileInfo // as reconciled
	before   map[uint32]BlobFileInfo // as catalogued
	records  []*tailRecord
	stale    []*tailRecord // put records older than seq: copies of catalogued packets
	disk     map[uint32]uint64
	state    map[string]*entryState
	rep      ReconcileReport
}

// plan reads the catalog's records and the blob files' tails and decides.
func (rc *reconciler) plan() error {
	if err := rc.load(); err != nil {
		return err
	}
	disk, err := maint.DiskFiles(rc.fs, rc.dir)
	if err != nil {
		return err
	}
	rc.lastDisk, rc.disk = diskMax(disk), disk
	for _, num := range maint.SortedKeys(disk) {
		size := disk[num]
		r, ok := rc.recs[num]
		switch {
		case ok && size > r.Size:
			err = rc.scan(num, r.Size, size)
		case !ok && num >= rc.next:
			err = rc.scanNew(num, size)
		}
		if err != nil {
			return err
		}
	}
	rc.apply()
	return nil
}

// load reads the blob file records and the two sequences.
func (rc *reconciler) load() error {
	rc.recs, rc.before, rc.state = map[uint32]BlobFileInfo{}, map[uint32]BlobFileInfo{}, map[string]*entryState{}
	rc.next = 1
	if rc.full {
		return nil
	}
	p := []byte{catalog.TagBlobFile}
	err := rc.cat.Scan(p, catalog.PrefixEnd(p), func(k, v []byte) (bool, error) {
		num, err := catalog.ParseBlobFileKey(k)
		if err != nil {
			return false, err
		}
		r, err := decodeBlobRecord(num, v)
		rc.recs[num], rc.before[num] = r, r
		return err == nil, err
	})
	if err != nil {
		return fmt.Errorf("store: reconcile: blob file records: %w", err)
	}
	if _, err := rc.cat.Get(catalog.KeyNextBlob, func(v []byte) (err error) {
		rc.next, err = decodeSequence(v)
		return err
	}); err != nil {
		return fmt.Errorf("store: reconcile: next blob file number: %w", err)
	}
	if _, err := rc.cat.Get(catalog.KeyRecordSeq, func(v []byte) (err error) {
		rc.seq, err = format.DecodeRecordSeq(v)
		return err
	}); err != nil {
		return fmt.Errorf("store: reconcile: next record sequence: %w", err)
	}
	return nil
}

// scanNew scans a blob file the catalog does not know, from its header.
func (rc *reconciler) scanNew(num uint32, size uint64) error {
	path := rc.fs.PathJoin(rc.dir, bloblog.FileName(num))
	f, err := rc.fs.Open(path)
	if err != nil {
		return fmt.Errorf("store: reconcile: open %s: %w", path, err)
	}
	hdr := make([]byte, format.BlobHeaderSize)
	n, _ := f.ReadAt(hdr, 0)
	_ = f.Close()
	if n < len(hdr) {
		return nil // created, never written to: nothing in it was acknowledged
	}
	if got, err := format.DecodeBlobHeader(hdr); err != nil || got != num {
		rc.problem("blob file %s: header: %v (file %06d): not scanned", path, err, got)
		return nil
	}
	return rc.scan(num, format.BlobHeaderSize, size)
}

// scan reads the whole extents of file num in [from, size).
func (rc *reconciler) scan(num uint32, from, size uint64) error {
	path := rc.fs.PathJoin(rc.dir, bloblog.FileName(num))
	f, err := rc.fs.Open(path)
	if err != nil {
		return fmt.Errorf("store: reconcile: open %s: %w", path, err)
	}
	defer f.Close()
	end, err := bloblog.Scan(f, path, from, size, func(e *bloblog.Scanned) error {
		rc.rep.Scanned++
		rc.classify(num, path, e)
		return nil
	})
	if err != nil {
		return fmt.Errorf("store: reconcile: %w", err)
	}
	rc.rep.TornBytes += size - end
	return nil
}

// classify decodes the record leading (or making) extent e.
func (rc *reconciler) classify(num uint32, path string, e *bloblog.Scanned) {
	t := &tailRecord{num: num, off: e.Offset, n: e.Length}
	kind, ok := format.KindOf(e.Payload)
	switch {
	case ok && kind.Magic == format.KindPutRecord.Magic:
		r, err := format.DecodePutRecord(framed(e.Payload))
		if err != nil {
			rc.problem("%s at %d: %v", path, e.Offset, err)
			return
		}
		if r.Header.ID != e.Trailer.Packet || r.Header.ExtentLength != e.Length {
			rc.problem("%s at %d: put record of %s does not describe its extent", path, e.Offset, r.Header.ID.Short())
			return
		}
		t.seq, t.put, t.spec = r.Seq, repointHeader(r.Header, num, e.Offset), r.Spec
	case ok && kind.Magic == format.KindTombstone.Magic:
		ts, err := format.DecodeTombstone(e.Payload)
		if err != nil || ts.ID != e.Trailer.Packet {
			rc.problem("%s at %d: tombstone: %v", path, e.Offset, err)
			return
		}
		t.seq, t.tomb = ts.Seq, ts
	default:
		rc.rep.NoRecord++
		return
	}
	if t.seq < rc.seq {
		if t.put != nil {
			rc.stale = append(rc.stale, t)
		}
		rc.rep.Stale++
		return
	}
	rc.records = append(rc.records, t)
}

// framed returns the framed record at the start of b, cut to its length
// (Unseal then checks it).
func framed(b []byte) []byte {
	if len(b) < format.FrameSize {
		return b
	}
	n := uint64(binary.LittleEndian.Uint32(b[8:])) + format.FrameSize
	return b[:min(n, uint64(len(b)))]
}

// repointHeader returns h with its extent at off of file num.
func repointHeader(h *format.PacketHeader, num uint32, off uint64) *format.PacketHeader {
	n := *h
	n.Chunks = slices.Clone(h.Chunks)
	for i := range n.Chunks {
		n.Chunks[i].BlobFile = num
		n.Chunks[i].Offset = n.Chunks[i].Offset - h.ExtentOffset + off
	}
	n.BlobFile, n.ExtentOffset = num, off
	return &n
}

func (rc *reconciler) problem(f string, args ...any) {
	rc.rep.Problems = append(rc.rep.Problems, fmt.Sprintf(f, args...))
}

// repoint points a catalogued packet whose blob file is gone from disk at
// a copy of its extent found in a file the catalog does not list: what a
// compaction whose batch was lost (with a damaged WAL) leaves, after it
// removed the files it had copied from.
func (rc *reconciler) repoint() {
	for _, t := range rc.stale {
		cur, err := rc.current(t.key())
		if err != nil || cur.h == nil || cur.rec != nil || cur.h.ID != t.put.ID {
			continue
		}
		if _, ok := rc.disk[cur.h.BlobFile]; ok {
			continue
		}
		rc.kill(cur)
		rc.state[t.key()] = &entryState{h: t.put, rec: t}
		t.applied = true
		rc.records = append(rc.records, t)
		rc.rep.Repointed++
		rc.rep.Stale--
	}
}

// apply plays the records in sequence order over the catalog's packets.
func (rc *reconciler) apply() {
	rc.repoint()
	slices.SortStableFunc(rc.records, func(a, b *tailRecord) int { return cmp.Compare(a.seq, b.seq) })
	for _, t := range rc.records {
		if t.applied {
			continue // repointed
		}
		cur, err := rc.current(t.key())
		if err != nil {
			rc.problem("packet of the record at %06d:%d: %v", t.num, t.off, err)
			continue
		}
		switch {
		case t.put != nil && cur.h != nil && cur.rec != nil && cur.rec.seq == t.seq:
			t.duplicate = true // a copy compaction made of the same record
		case t.put != nil:
			if cur.h != nil {
				rc.rep.Replaced++
			} else {
				rc.rep.Inserted++
			}
			rc.kill(cur)
			rc.state[t.key()] = &entryState{h: t.put, rec: t}
			t.applied = true
		case cur.h == nil:
			t.applied = true // a delete already in the catalog, or of nothing
		case cur.h.Model != t.tomb.Model:
			rc.problem("tombstone at %06d:%d deletes %s for model %s, catalogued for %s",
				t.num, t.off, t.tomb.ID.Short(), t.tomb.Model.Short(), cur.h.Model.Short())
		default:
			rc.rep.Deleted++
			rc.kill(cur)
			rc.state[t.key()] = &entryState{}
			t.applied = true
		}
	}
	rc.account()
}

// current is the packet's entry so far: the reconciled one, else the
// catalog's.
func (rc *reconciler) current(key string) (*entryState, error) {
	if s, ok := rc.state[key]; ok {
		return s, nil
	}
	s := &entryState{}
	if rc.full {
		return s, nil
	}
	_, err := rc.cat.Get([]byte(key), func(v []byte) (err error) {
		s.h, err = format.DecodeHeader(v)
		return err
	})
	return s, err
}

// kill makes a catalogued packet's extent dead in its file's record; an
// extent found in a tail is accounted for by account.
func (rc *reconciler) kill(s *entryState) {
	if s.h == nil || s.rec != nil {
		return
	}
	r, ok := rc.recs[s.h.BlobFile]
	if !ok {
		rc.problem("packet %s: its blob file %06d has no record", s.h.ID.Short(), s.h.BlobFile)
		return
	}
	r.KillExtent(s.h.ExtentLength)
	rc.recs[s.h.BlobFile] = r
}

// account extends each file's record over the extents up to its last
// applied record: live for the puts that are their packet's entry at the
// end, dead for the rest (tombstones, replaced and duplicate puts).
func (rc *reconciler) account() {
	ends := map[uint32]uint64{}
	for _, t := range rc.records {
		if t.applied {
			ends[t.num] = max(ends[t.num], t.off+t.n)
		}
	}
	byPos := slices.Clone(rc.records)
	slices.SortFunc(byPos, func(a, b *tailRecord) int {
		return cmp.Or(cmp.Compare(a.num, b.num), cmp.Compare(a.off, b.off))
	})
	for _, num := range maint.SortedKeys(ends) {
		r, ok := rc.recs[num]
		if !ok {
			r = BlobFileInfo{Num: num, Size: format.BlobHeaderSize}
			rc.rep.NewFiles++
		}
		end := ends[num]
		var counted uint64
		for _, t := range byPos {
			if t.num != num || t.off+t.n > end {
				continue
			}
			r.Extents++
			counted += t.n
			if s := rc.state[t.key()]; t.put != nil && s != nil && s.rec == t {
				r.LiveBytes += t.n
				r.LiveExtents++
			} else {
				r.DeadBytes += t.n
			}
		}
		// Extents without a record (or stale) between them are dead.
		r.DeadBytes += end - r.Size - counted
		r.Size = end
		rc.recs[num] = r
	}
}

// batch adds the reconciled entries to b: packets, models, the blob file
// records that changed, the sequences.
func (rc *reconciler) batch(b *pebble.Batch) error {
	models := map[format.Fingerprint]bool{}
	for key, s := range rc.state {
		k := []byte(key)
		if s.h == nil {
			continue
		}
		v, err := format.EncodeHeader(s.h)
		if err != nil {
			return err
		}
		_ = b.Set(k, v, nil)
		_ = b.Set(catalog.IndexKey(s.h.Namespace, s.h.Model, s.h.ID), nil, nil)
		if !models[s.h.Model] {
			models[s.h.Model] = true
			if err := rc.addModel(b, s.rec.spec); err != nil {
				return err
			}
		}
	}
	for _, t := range rc.records {
		if s := rc.state[t.key()]; t.tomb != nil && s != nil && s.h == nil {
			_ = b.Delete([]byte(t.key()), nil)
			_ = b.Delete(catalog.IndexKey(t.tomb.Namespace, t.tomb.Model, t.tomb.ID), nil)
			deleteOpsKeys(b, t.tomb.Namespace, t.tomb.ID)
		}
	}
	var last uint32
	for num := range rc.recs {
		last = max(last, num)
	}
	for _, num := range maint.SortedKeys(rc.recs) {
		r := rc.recs[num]
		if num != last && !r.Sealed {
			r.Sealed = true // a newer file was appended to
		}
		if old, ok := rc.before[num]; ok && old == r {
			continue
		}
		_ = b.Set(catalog.BlobFileKey(num), encodeBlobRecord(&r), nil)
	}
	if n := rc.nextBlob(); n != rc.next || rc.full {
		_ = b.Set(catalog.KeyNextBlob, encodeSequence(n), nil)
	}
	_ = b.Set(catalog.KeyRecordSeq, format.EncodeRecordSeq(rc.nextSeq()), nil)
	return nil
}

// addModel catalogues m unless the catalog has it.
func (rc *reconciler) addModel(b *pebble.Batch, m *format.ModelSpec) error {
	fp := m.Fingerprint()
	if ok, err := rc.cat.Has(catalog.ModelKey(fp)); err != nil || ok {
		return err
	}
	v, err := format.EncodeModelSpec(m)
	if err != nil {
		return err
	}
	return b.Set(catalog.ModelKey(fp), v, nil)
}

// nextSeq is the sequence the next record gets.
func (rc *reconciler) nextSeq() uint64 {
	n := rc.seq
	for _, t := range rc.records {
		n = max(n, t.seq+1)
	}
	return n
}

// reconcile brings the catalog up to date with the blob log before the
// store is loaded: put records and tombstones synced past the catalog's
// recorded ends (a batch lost with a damaged WAL, or never committed
// because the process stopped) are applied. A read-only open that finds
// any is refused (ErrCorruption): it cannot write the catalog, and would
// serve it without them.
func (db *DB) reconcile() error {
	rc := &reconciler{fs: db.fs, dir: db.w.Dir, cat: db.cat}
	rep, err := rc.run(db.opts.ReadOnly)
	if err != nil {
		return err
	}
	db.w.Seq = rc.nextSeq()
	db.reconciled = *rep
	db.logReconcile(rep)
	return nil
}

// run plans and, unless dryRun, commits.
func (rc *reconciler) run(dryRun bool) (*ReconcileReport, error) {
	if err := rc.plan(); err != nil {
		return nil, err
	}
	if !rc.rep.Changed() && !rc.full {
		return &rc.rep, nil
	}
	if dryRun {
		return &rc.rep, fmt.Errorf("%w: the blob log holds %d packet records (and %d deletes) newer than the catalog: open the store read-write to re-insert them, or run kvstore recover",
			ErrCorruption, rc.rep.Inserted+rc.rep.Replaced, rc.rep.Deleted)
	}
	b := rc.cat.DB.NewBatch()
	defer b.Close()
	if err := rc.batch(b); err != nil {
		return nil, fmt.Errorf("store: reconcile: %w", err)
	}
	if err := rc.cat.Commit(b); err != nil {
		return nil, fmt.Errorf("store: reconcile: %w", err)
	}
	return &rc.rep, nil
}

// logReconcile reports what reconcile found: changes at Warn (the catalog
// had lost them), problems at Error.
func (db *DB) logReconcile(r *ReconcileReport) {
	if r.Changed() || r.NoRecord > 0 {
		db.log.Warn("store: recovery: the catalog lacked records the blob log holds",
			"dir", db.dir, "inserted", r.Inserted, "replaced", r.Replaced, "deleted", r.Deleted, "repointed", r.Repointed,
			"new_files", r.NewFiles, "stale", r.Stale, "without_record", r.NoRecord, "torn_bytes", r.TornBytes)
	}
	for _, p := range r.Problems {
		db.log.Error("store: recovery: record left out", "dir", db.dir, "problem", p)
	}
}
