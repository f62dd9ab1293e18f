package store

import (
	"context"
	"fmt"

	"github.com/kvstore/kvstore/store/internal/maint"
)

// Compaction (store/internal/maint draws its steps) rewrites blob files
// that are mostly dead; the root admits it, holds the writer lock, commits
// its batch and installs the result in the registry.

// CompactOptions tune Compact. The zero value uses the store's options.
type CompactOptions = maint.CompactOptions

// CompactReport says what Compact did.
type CompactReport = maint.CompactReport

// SkippedFile is a file Compact chose but left alone, and why.
type SkippedFile = maint.SkippedFile

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
// the rest as it was. Files named in o.Files that are not catalogued, and
// the active file however chosen, are listed in the report's Skipped with
// the reason. o.DryRun reports the choice and writes nothing. Readers keep
// working throughout (a Get that races the repointing retries); writers
// wait, since Compact holds the writer lock.
//
// Span memory extents move like packets' (every resident and factor block
// verified on the way); their root and head records are re-encoded for the
// new place in the same batch, and SpanReaders opened before keep reading.
// A file with a chunk, block or trailer that fails verification, or a span
// memory head record that is missing or bad, is skipped and reported,
// never copied. Compact is crash-safe at every step and idempotent. While
// the store holds new data for lack of disk space (space.go) it fails with
// ErrNoSpace: delete and GC first.
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
		if db.w.Hold != nil {
			return fmt.Errorf("compact: %w", db.w.Hold)
		}
		rep, err = db.compactLocked(ctx, &o)
		return err
	})
	return rep, err
}

// compactLocked runs a compaction, group by group, or reports what it
// would do; the writer lock is held. On an error the report says what the
// groups before the failing one did.
func (db *DB) compactLocked(ctx context.Context, o *CompactOptions) (*CompactReport, error) {
	plan := maint.NewCompaction(db.maintStore(true), o, db.BlobFiles(), db.w.Next, uint64(db.opts.BlobFileSize))
	rep := plan.Report()
	srcs := plan.Sources()
	if o.DryRun {
		for _, r := range srcs {
			rep.Rewritten = append(rep.Rewritten, r.Num)
			rep.Extents += int(r.LiveExtents)
			rep.BytesCopied += r.LiveBytes
			rep.BytesReclaimed += r.Size - r.LiveBytes
		}
		return rep, nil
	}
	var total, done int64
	for _, r := range srcs {
		total += int64(r.LiveBytes)
	}
	for _, g := range compactGroups(srcs, uint64(db.opts.BlobFileSize)) {
		step := CompactOptions{Files: g}
		if o.Progress != nil {
			base := done
			step.Progress = func(d, _ int64) { o.Progress(base+d, total) }
		}
		srep, err := db.compactStep(ctx, &step)
		if srep != nil {
			mergeCompactReport(rep, srep)
			done += int64(srep.BytesCopied)
		}
		if err != nil {
			db.countCompaction(rep)
			return rep, err
		}
	}
	db.countCompaction(rep)
	return rep, nil
}

// countCompaction counts a Compact (all its groups) that rewrote a file.
func (db *DB) countCompaction(rep *CompactReport) {
	if len(rep.Rewritten) > 0 {
		db.st.compactions.Add(1)
	}
}

// compactGroups splits the sources, in order, into the groups Compact
// commits one at a time: as many files as hold at most limit live bytes
// together (a file holding more is a group of its own). Each group's
// outputs are about one blob file, so packing is kept and a compaction's
// extra space stays bounded.
func compactGroups(srcs []BlobFileInfo, limit uint64) [][]uint32 {
	var groups [][]uint32
	var cur []uint32
	var live uint64
	for _, r := range srcs {
		if len(cur) > 0 && live+r.LiveBytes > limit {
			groups = append(groups, cur)
			cur, live = nil, 0
		}
		cur = append(cur, r.Num)
		live += r.LiveBytes
	}
	if len(cur) > 0 {
		groups = append(groups, cur)
	}
	return groups
}

// mergeCompactReport adds what one group did to the whole report.
func mergeCompactReport(rep, step *CompactReport) {
	rep.Rewritten = append(rep.Rewritten, step.Rewritten...)
	rep.Created = append(rep.Created, step.Created...)
	rep.Extents += step.Extents
	rep.BytesCopied += step.BytesCopied
	rep.BytesReclaimed += step.BytesReclaimed
	rep.Skipped = append(rep.Skipped, step.Skipped...)
}

// compactStep compacts one group of files in one synced batch.
func (db *DB) compactStep(ctx context.Context, o *CompactOptions) (*CompactReport, error) {
	c := maint.NewCompaction(db.maintStore(true), o, db.BlobFiles(), db.w.Next, uint64(db.opts.BlobFileSize))
	if c.Empty() {
		return c.Report(), nil
	}
	if err := c.Run(ctx); err != nil {
		return nil, err
	}
	b := db.cat.DB.NewBatch()
	defer b.Close()
	if err := c.Batch(b); err != nil {
		return nil, err
	}
	outs := c.Outputs()
	for _, r := range outs {
		db.addFile(r)
	}
	if err := db.commit(b); err != nil {
		c.Close()
		for _, r := range outs {
			db.dropFile(r.Num)
		}
		return nil, fmt.Errorf("compact: %w", err)
	}
	c.Close()
	db.setRecords(outs...)
	if len(outs) > 0 {
		db.w.Next = outs[len(outs)-1].Num + 1
	}
	retire := c.Finish()
	for _, num := range retire {
		db.retire(num)
	}
	rep := c.Report()
	db.st.compactedBytes.Add(rep.BytesCopied)
	db.st.reclaimedBytes.Add(rep.BytesReclaimed)
	db.logCompaction(rep)
	for _, h := range c.Moved() {
		db.publish(Event{Kind: EventCompacted, Namespace: h.Namespace, Model: h.Model, ID: h.ID})
	}
	return rep, nil
}
