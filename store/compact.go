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

// compactLocked runs a compaction; the writer lock is held.
func (db *DB) compactLocked(ctx context.Context, o *CompactOptions) (*CompactReport, error) {
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
	if len(rep.Rewritten) > 0 {
		db.st.compactions.Add(1)
	}
	db.st.compactedBytes.Add(rep.BytesCopied)
	db.st.reclaimedBytes.Add(rep.BytesReclaimed)
	db.logCompaction(rep)
	for _, h := range c.Moved() {
		db.publish(Event{Kind: EventCompacted, Namespace: h.Namespace, Model: h.Model, ID: h.ID})
	}
	return rep, nil
}
