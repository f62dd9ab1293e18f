package store

import (
	"context"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/kvstore/kvstore/store/internal/bloblog"
	"github.com/kvstore/kvstore/store/internal/maint"
)

// VerifyOptions tune Verify. The zero value means the defaults.
type VerifyOptions struct {
	// MaxFindings stops the walk once so many findings are reported
	// (0: no limit): the report holds at most that many, the first found,
	// and says Truncated.
	MaxFindings int
	// Progress, if not nil, is called after each extent with the bytes
	// read so far and the catalogued live bytes at the start.
	Progress func(done, total int64)
}

// toVerifyOptions is o as maint's (the same fields).
func toVerifyOptions(o *VerifyOptions) *maint.VerifyOptions { return (*maint.VerifyOptions)(o) }

// VerifyReport is what Verify read and found.
type VerifyReport struct {
	// Extents is how many extents were read (packets and span memories).
	Extents int64
	// Chunks is how many chunks and span blocks had their CRC32C checked.
	Chunks int64
	// Bytes is the extent bytes read.
	Bytes int64
	// Findings are what is wrong: a healthy store has none.
	Findings []Finding
	// Skipped counts extents moved or deleted while Verify ran (a
	// concurrent Compact or Delete): they were not read.
	Skipped int64
	// Truncated: MaxFindings was reached.
	Truncated bool
}

// OK reports whether nothing was found.
func (r *VerifyReport) OK() bool { return len(r.Findings) == 0 }

// fromVerifyReport is maint's report as the store's; nil stays nil.
func fromVerifyReport(r *maint.VerifyReport) *VerifyReport {
	if r == nil {
		return nil
	}
	return &VerifyReport{Extents: r.Extents, Chunks: r.Chunks, Bytes: r.Bytes, Findings: mapSlice(r.Findings, fromFinding),
		Skipped: r.Skipped, Truncated: r.Truncated}
}

// Verify reads every catalogued extent (packets and span memories) and
// checks the CRC32C of each chunk and span block against its record, and
// each extent's trailer (magic, CRC, owner, offset, length and payload
// CRC). It reports each bad chunk with its file, offset, packet or
// context, layer and K|V, and goes on after a bad chunk, an undecodable
// record or an extent past its file's end: those are findings, not
// errors. The error is only for I/O failures, ErrClosed and ctx's error.
//
// Verify sees the catalog as of its start (a Pebble snapshot) and runs
// beside readers and writers; it ignores the verification cache, so every
// byte is read again. o.Progress, if not nil, is called after each extent
// with the bytes read so far and the catalogued live bytes at the start.
func (db *DB) Verify(ctx context.Context, o VerifyOptions) (*VerifyReport, error) {
	if err := db.enter(); err != nil {
		return nil, err
	}
	defer db.leave()
	snap := db.cat.DB.NewSnapshot()
	defer snap.Close()
	var total int64
	for _, f := range db.blobRecords() {
		total += int64(f.LiveBytes)
	}
	rep, err := maint.Verify(ctx, db.maintStore(false), snap, toVerifyOptions(&o), total, o.Progress)
	return fromVerifyReport(rep), err
}

// maintStore is what store/internal/maint reads of db. Callers are
// inside the gate; it names the active blob file only to a caller holding
// the writer lock (locked), which guards it.
func (db *DB) maintStore(locked bool) *maint.Store {
	s := &maint.Store{Catalog: db.cat, FS: db.fs, Dir: db.w.Dir, Files: registry{db},
		SyncData: func(f vfs.File) error { return timed(&db.st.blobSyncs, &db.st.blobSyncNanos, f.SyncData) },
		Wrote:    func(n uint64) { db.st.bytesWritten.Add(n) }}
	if locked && db.w.Cur != nil {
		s.Active, s.HasActive = db.w.Cur.Num, true
	}
	return s
}

// registry gives maintenance the DB's blob file registry.
type registry struct{ db *DB }

func (r registry) File(num uint32) *bloblog.File { return r.db.file(num) }
func (r registry) Retiring(num uint32) bool      { return r.db.isRetiring(num) }
func (r registry) Records() []blobRecord         { return r.db.blobRecords() }
func (r registry) Add(f blobRecord)              { r.db.addFile(f) }
func (r registry) Drop(num uint32)               { r.db.dropFile(num) }
func (r registry) Install(rs ...blobRecord)      { r.db.setRecords(rs...) }
func (r registry) Retire(num uint32)             { r.db.retire(num) }
