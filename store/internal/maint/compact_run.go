package maint

import (
	"context"
	"fmt"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store/internal/catalog"
)

// Compact runs a compaction as o chooses, group by group, or reports what
// it would do (o.DryRun): as many chosen files as hold at most FileSize
// live bytes together (a file holding more is a group alone), each group
// copied and then committed in one synced batch, installed and its
// sources retired before the next starts. On an error the report says
// what the groups before the failing one did, and Next is past their
// outputs. A group the disk has no room for (Fits) is skipped, each of
// its files listed in the report's Skipped with the room it needs; the
// groups after it are still tried, since each one committed frees room.
func (w *Writer) Compact(ctx context.Context, o *CompactOptions) (*CompactReport, error) {
	plan := NewCompaction(w.Store, o, w.Registry.Records(), w.Next, w.FileSize)
	rep := plan.Report()
	srcs := plan.Sources()
	byNum := make(map[uint32]catalog.BlobFile, len(srcs))
	var total, done int64
	for _, r := range srcs {
		byNum[r.Num] = r
		total += int64(r.LiveBytes)
	}
	for _, g := range groups(srcs, w.FileSize) {
		if !w.fits(rep, g, byNum) {
			continue
		}
		if o.DryRun {
			for _, n := range g {
				r := byNum[n]
				rep.Rewritten = append(rep.Rewritten, r.Num)
				rep.Extents += int(r.LiveExtents)
				rep.BytesCopied += r.LiveBytes
				rep.BytesReclaimed += r.Size - r.LiveBytes
			}
			continue
		}
		step := CompactOptions{Files: g}
		if o.Progress != nil {
			base := done
			step.Progress = func(d, _ int64) { o.Progress(base+d, total) }
		}
		srep, err := w.compactStep(ctx, &step)
		if srep != nil {
			merge(rep, srep)
			done += int64(srep.BytesCopied)
		}
		if err != nil {
			return rep, err
		}
	}
	return rep, nil
}

// fits reports whether the disk has room to rewrite group g (its live
// bytes and an output header per FileSize of them), and otherwise lists
// its files in rep.Skipped with the room they need.
func (w *Writer) fits(rep *CompactReport, g []uint32, recs map[uint32]catalog.BlobFile) bool {
	if w.Fits == nil {
		return true
	}
	var live uint64
	for _, n := range g {
		live += recs[n].LiveBytes
	}
	need := live + format.BlobHeaderSize*(1+live/max(w.FileSize, 1))
	free, ok := w.Fits(need)
	if !ok {
		for _, n := range g {
			rep.Skipped = append(rep.Skipped, SkippedFile{Num: n, Reason: fmt.Sprintf(
				"no room: rewriting it (with its group) needs %d bytes free besides the room the store keeps for its catalog; %d are free: delete more, or run gc, and retry", need, free)})
		}
	}
	return ok
}

// groups splits the sources, in order, into the groups Compact commits
// one at a time: as many files as hold at most limit live bytes together
// (a file holding more is a group of its own). Each group's outputs are
// about one blob file, so packing is kept and a compaction's extra space
// stays bounded.
func groups(srcs []catalog.BlobFile, limit uint64) [][]uint32 {
	var gs [][]uint32
	var cur []uint32
	var live uint64
	for _, r := range srcs {
		if len(cur) > 0 && live+r.LiveBytes > limit {
			gs = append(gs, cur)
			cur, live = nil, 0
		}
		cur = append(cur, r.Num)
		live += r.LiveBytes
	}
	if len(cur) > 0 {
		gs = append(gs, cur)
	}
	return gs
}

// merge adds what one group did to the whole report.
func merge(rep, step *CompactReport) {
	rep.Rewritten = append(rep.Rewritten, step.Rewritten...)
	rep.Created = append(rep.Created, step.Created...)
	rep.Extents += step.Extents
	rep.BytesCopied += step.BytesCopied
	rep.BytesReclaimed += step.BytesReclaimed
	rep.Skipped = append(rep.Skipped, step.Skipped...)
}

// compactStep compacts one group of files in one synced batch.
func (w *Writer) compactStep(ctx context.Context, o *CompactOptions) (*CompactReport, error) {
	c := NewCompaction(w.Store, o, w.Registry.Records(), w.Next, w.FileSize)
	if c.Empty() {
		return c.Report(), nil
	}
	if err := c.Run(ctx); err != nil {
		return nil, err
	}
	b := w.Catalog.DB.NewBatch()
	defer b.Close()
	if err := c.Batch(b); err != nil {
		return nil, err
	}
	outs := c.Outputs()
	for _, r := range outs {
		w.Registry.Add(r)
	}
	if err := w.Commit(b); err != nil {
		c.Close()
		for _, r := range outs {
			w.Registry.Drop(r.Num)
		}
		return nil, fmt.Errorf("compact: %w", err)
	}
	c.Close()
	w.Registry.Install(outs...)
	if len(outs) > 0 {
		w.Next = outs[len(outs)-1].Num + 1
	}
	for _, num := range c.Finish() {
		w.Registry.Retire(num)
	}
	rep := c.Report()
	if w.Compacted != nil {
		w.Compacted(rep, c.Moved())
	}
	return rep, nil
}
