package recovery

import (
	"fmt"
	"maps"
	"slices"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store/internal/catalog"
)

// Store is what a reconciliation reads and writes, given explicitly. The
// store builds one per Open or Recover; recovery never sees the DB.
type Store struct {
	Catalog *catalog.Catalog
	FS      vfs.FS
	Dir     string            // the blobs/ directory
	Disk    map[uint32]uint64 // the size of every blob file in Dir (maint.DiskFiles)
	// Full rebuilds: Catalog is new and empty, so its records are not
	// read and every blob file is scanned from its header.
	Full bool
	// DropPacket adds to b the removal of the records a deleted packet
	// keeps beside its header and index entry (access statistics, pin),
	// for the batch that applies its tombstone; nil: none.
	DropPacket func(b *pebble.Batch, ns string, id format.PacketID)
}

// Plan is a reconciliation decided and not yet written: Reconcile makes
// it, Commit writes it.
type Plan struct {
	s *Store
	// Report is what the plan found and will change.
	Report Report

	seq      uint64                      // the catalog's next-record sequence
	next     uint32                      // the catalog's next blob file number
	lastDisk uint32                      // the highest numbered blob file on disk
	recs     map[uint32]catalog.BlobFile // as reconciled
	before   map[uint32]catalog.BlobFile // as catalogued
	records  []*tailRecord
	stale    []*tailRecord // put records older than seq: copies of catalogued packets
	state    map[string]*entryState
}

// Reconcile compares the blob log with s's catalog: it reads every blob
// file's bytes past its catalogued size (every file from its header when
// s.Full), and plays, in sequence order, the put records and tombstones
// newer than the catalog's next-record sequence over the catalog's
// packets. It writes nothing; a record that contradicts the catalog is
// left out and named in Report.Problems.
func Reconcile(s *Store) (*Plan, error) {
	p := &Plan{s: s}
	if err := p.load(); err != nil {
		return nil, err
	}
	p.lastDisk = diskMax(s.Disk)
	for _, num := range slices.Sorted(maps.Keys(s.Disk)) {
		size := s.Disk[num]
		r, ok := p.recs[num]
		var err error
		switch {
		case ok && size > r.Size:
			err = p.scan(num, r.Size, size)
		case !ok && num >= p.next:
			err = p.scanNew(num, size)
		}
		if err != nil {
			return nil, err
		}
	}
	p.apply()
	return p, nil
}

// load reads the blob file records and the two sequences.
func (p *Plan) load() error {
	p.recs, p.before, p.state = map[uint32]catalog.BlobFile{}, map[uint32]catalog.BlobFile{}, map[string]*entryState{}
	p.next = 1
	if p.s.Full {
		return nil
	}
	cat := p.s.Catalog
	pre := []byte{catalog.TagBlobFile}
	err := cat.Scan(pre, catalog.PrefixEnd(pre), func(k, v []byte) (bool, error) {
		num, err := catalog.ParseBlobFileKey(k)
		if err != nil {
			return false, err
		}
		r, err := catalog.DecodeBlobFile(num, v)
		p.recs[num], p.before[num] = r, r
		return err == nil, err
	})
	if err != nil {
		return fmt.Errorf("store: reconcile: blob file records: %w", err)
	}
	if _, err := cat.Get(catalog.KeyNextBlob, func(v []byte) (err error) {
		p.next, err = catalog.DecodeSequence(v)
		return err
	}); err != nil {
		return fmt.Errorf("store: reconcile: next blob file number: %w", err)
	}
	if _, err := cat.Get(catalog.KeyRecordSeq, func(v []byte) (err error) {
		p.seq, err = format.DecodeRecordSeq(v)
		return err
	}); err != nil {
		return fmt.Errorf("store: reconcile: next record sequence: %w", err)
	}
	return nil
}

func (p *Plan) problem(f string, args ...any) {
	p.Report.Problems = append(p.Report.Problems, fmt.Sprintf(f, args...))
}

// NextSeq is the sequence the next record gets.
func (p *Plan) NextSeq() uint64 {
	n := p.seq
	for _, t := range p.records {
		n = max(n, t.seq+1)
	}
	return n
}

// NextBlob is the next blob file number the reconciled catalog holds:
// past every file on disk after a full rebuild, so that no file is
// created over one it left uncatalogued.
func (p *Plan) NextBlob() uint32 {
	n := p.next
	for num := range p.recs {
		n = max(n, num+1)
	}
	if p.s.Full {
		n = max(n, p.lastDisk+1)
	}
	return n
}

// diskMax is the highest blob file number in disk.
func diskMax(disk map[uint32]uint64) uint32 {
	var n uint32
	for num := range disk {
		n = max(n, num)
	}
	return n
}

// GoneFiles lists the blob file numbers from 1 to the highest in disk
// that have no file there: removed by compaction or GC, with whatever
// tombstones they held.
func GoneFiles(disk map[uint32]uint64) []uint32 {
	var gone []uint32
	for num := uint32(1); num < diskMax(disk); num++ {
		if _, ok := disk[num]; !ok {
			gone = append(gone, num)
		}
	}
	return gone
}
