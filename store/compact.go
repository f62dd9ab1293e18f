package store

import (
	"context"
	"fmt"
	"slices"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store/internal/catalog"
	"github.com/kvstore/kvstore/store/internal/maint"
)

// Compaction (store/internal/maint draws its steps) rewrites blob files
// that are mostly dead; the root admits it and holds the writer lock, and
// maint.Writer runs it, committing each group and installing it through
// the root's registry.

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

// toCompactOptions is o as maint's (the same fields).
func toCompactOptions(o *CompactOptions) *maint.CompactOptions { return (*maint.CompactOptions)(o) }

// CompactReport says what Compact did.
type CompactReport struct {
	// Rewritten are the source files retired (removed once no view maps
	// them).
	Rewritten []uint32
	// Created are the output files.
	Created []uint32
	// Extents is how many extents were moved.
	Extents int
	// BytesCopied is the live bytes copied to the output files.
	BytesCopied uint64
	// BytesReclaimed is, of the retired files, their size minus what was
	// copied.
	BytesReclaimed uint64
	// Skipped are the files chosen but left alone, with the reason.
	Skipped []SkippedFile
}

// fromCompactReport is maint's report as the store's; nil stays nil.
func fromCompactReport(r *maint.CompactReport) *CompactReport {
	if r == nil {
		return nil
	}
	return &CompactReport{Rewritten: r.Rewritten, Created: r.Created, Extents: r.Extents, BytesCopied: r.BytesCopied,
		BytesReclaimed: r.BytesReclaimed, Skipped: mapSlice(r.Skipped, fromSkippedFile)}
}

// SkippedFile is a file Compact chose but left alone, and why.
type SkippedFile struct {
	// Num is the blob file's number.
	Num uint32
	// Reason says why it was left alone.
	Reason string
}

// fromSkippedFile is maint's skipped file as the store's.
func fromSkippedFile(f maint.SkippedFile) SkippedFile { return SkippedFile(f) }

// Compact rewrites the blob files chosen by o (see CompactOptions): their
// live extents are copied to new blob files through the same write and
// fdatasync path as Put, the catalog is repointed, and the old files are
// removed once no View or reader maps them.
//
// It goes in groups, in file number order: as many chosen files as hold at
// most Options.BlobFileSize live bytes together (a file holding more is a
// group alone), each group copied and then committed in one synced batch
// before the next starts, its sources removed then unless a View maps
// them. So the extra disk space a compaction needs is bounded: at most
// max(BlobFileSize, the largest chosen file's live bytes) plus a 4 KiB
// header per output file, not the whole compaction's live bytes. A
// compaction that fails or is cancelled keeps the groups it committed
// (the report says which), removes the output it was writing, and leaves
// the rest as it was. Files named in o.Files that are not catalogued are
// listed in the report's Skipped with the reason.
//
// The active file (the one Puts append to), once chosen (its live ratio
// below o.LiveRatio, or named in o.Files), is rolled first: its record is
// committed sealed and the next write starts a new file, so deleted data
// is reclaimed without waiting for the file to fill. A group is rewritten
// only if the disk has room for its live bytes besides what the store
// keeps for its catalog (space.go); the files of a group that has not are
// listed in Skipped with the room they need, and Compact goes on with the
// next group (each one committed frees room). So it runs while the store
// holds new data for lack of disk space, and frees what it can.
// o.DryRun reports the choice and writes nothing. Readers keep
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
	var rep *maint.CompactReport
	err := db.write("compact", func() error {
		if o.LiveRatio == 0 {
			o.LiveRatio = db.opts.CompactLiveRatio
		}
		if !(o.LiveRatio > 0 && o.LiveRatio <= 1) {
			return fmt.Errorf("%w: compact: live ratio %v is not in (0, 1]", ErrInvalidArgument, o.LiveRatio)
		}
		return nil
	}, func() (err error) {
		rep, err = db.compactLocked(ctx, toCompactOptions(&o))
		return err
	})
	return fromCompactReport(rep), err
}

// compactLocked runs a compaction, group by group, or reports what it
// would do (maint.Writer.Compact), after rolling the active file if o
// chooses it; the writer lock is held. On an error the report says what
// the groups before the failing one did.
func (db *DB) compactLocked(ctx context.Context, o *maint.CompactOptions) (*maint.CompactReport, error) {
	rolled, err := db.rollActive(func(r blobRecord) bool {
		if len(o.Files) > 0 {
			return slices.Contains(o.Files, r.Num)
		}
		return mostlyDead(r, o.LiveRatio)
	}, o.DryRun)
	if err != nil {
		return &maint.CompactReport{}, err
	}
	w := db.maintWriter()
	if rolled != 0 {
		w.Active, w.HasActive = 0, false // as it will be once rolled (a dry run)
	}
	rep, err := w.Compact(ctx, o)
	db.w.Next = w.Next
	if !o.DryRun {
		db.countCompaction(rep)
		db.restoreReserve() // if it released the reserve, the room it freed may bring it back
	}
	return rep, err
}

// countCompaction counts a Compact (all its groups) that rewrote a file.
func (db *DB) countCompaction(rep *maint.CompactReport) {
	if len(rep.Rewritten) > 0 {
		db.st.compactions.Add(1)
	}
}

// maintWriter is what maintenance that changes the store gets of db (the
// writer lock held): maintStore(true), the registry, the commit, the next
// blob file number, and what installs a committed compaction group's
// effects (counters, log, events) and drops the active file.
func (db *DB) maintWriter() *maint.Writer {
	return &maint.Writer{Store: db.maintStore(true), Registry: registry{db}, Commit: db.commit,
		Next: db.w.Next, FileSize: db.w.Limit, Compacted: db.compacted, Fits: db.space.CopyRoom,
		DropActive: func() { _ = db.w.Close(); db.w.Cur = nil }}
}

// mostlyDead reports whether compaction at liveRatio chooses blob file r:
// it has dead bytes and its live bytes are below liveRatio of its extent
// bytes (maint's choice).
func mostlyDead(r blobRecord, liveRatio float64) bool {
	return r.DeadBytes > 0 && float64(r.LiveBytes) < liveRatio*float64(r.LiveBytes+r.DeadBytes)
}

// rollActive rolls the active blob file if choose picks its record: its
// record is committed sealed (with those of files sealed since the last
// batch) in one synced batch, and the next write starts a new file, so
// that compaction and GC treat it as any sealed file. In a dry run
// nothing changes. It returns the file's number, 0 if none was (or would
// be) rolled; the writer lock is held.
func (db *DB) rollActive(choose func(blobRecord) bool, dry bool) (uint32, error) {
	a := db.w.Cur
	if a == nil || a.Fresh {
		return 0, nil
	}
	r, ok := db.record(a.Num)
	if !ok || r.Sealed || !choose(r) {
		return 0, nil
	}
	if dry {
		return a.Num, nil
	}
	b := db.cat.DB.NewBatch()
	defer b.Close()
	var recs []blobRecord
	for _, num := range append(slices.Clone(db.w.Sealed), a.Num) {
		if s, ok := db.record(num); ok {
			s.Sealed = true
			_ = b.Set(catalog.BlobFileKey(num), catalog.EncodeBlobFile(&s), nil)
			recs = append(recs, s)
		}
	}
	if err := db.commit(b); err != nil {
		return 0, fmt.Errorf("roll blob file %06d: %w", a.Num, err)
	}
	db.setRecords(recs...)
	db.w.Sealed = db.w.Sealed[:0]
	db.w.Roll()
	db.log.Info("store: rolled the active blob file", "dir", db.dir, "file", a.Num,
		"live_bytes", r.LiveBytes, "dead_bytes", r.DeadBytes)
	return a.Num, nil
}

// compacted counts, logs and publishes one committed compaction group.
func (db *DB) compacted(rep *maint.CompactReport, moved []*format.PacketHeader) {
	db.st.compactedBytes.Add(rep.BytesCopied)
	db.st.reclaimedBytes.Add(rep.BytesReclaimed)
	db.logCompaction(rep)
	for _, h := range moved {
		db.publish(Event{Kind: EventCompacted, Namespace: h.Namespace, Model: h.Model, ID: h.ID})
	}
}
