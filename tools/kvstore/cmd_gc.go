package main

import (
	"context"
	"fmt"
	"io"
	"sort"

	"github.com/spf13/pflag"

	"github.com/kvstore/kvstore/store"
)

func init() {
	register(&command{name: "gc", summary: "reclaim orphaned and wholly dead blob space", long: gcSummary, setup: setupGC})
}

const gcSummary = `Reclaims what check lists as garbage and what is wholly dead
(store.GC): blob files with no catalog record (left by a crashed write or
compaction) are removed; records of vanished files that held nothing live
are deleted; sealed files with no live extent are removed; sealed files
with bytes past their catalogued size are rewritten. The active file, once
less than the store's compaction ratio of it is live, is rolled (sealed:
the next write starts a new file), then removed if nothing in it is live,
else rewritten. A file the disk has no room to rewrite is skipped, and
listed with the room it needs. --dry-run says what would be reclaimed and
writes nothing. Crash-safe and idempotent. On a full disk (the store's
RESERVE released by Open), rm then gc frees the room; compact frees what
files partly dead hold.`

type gcOutput struct {
	DryRun         bool              `json:"dry_run"`
	FilesRemoved   []uint32          `json:"files_removed"`
	RecordsRemoved []uint32          `json:"records_removed"`
	BytesReclaimed uint64            `json:"bytes_reclaimed"`
	Rewritten      []uint32          `json:"rewritten"` // by the compaction of files with garbage tails and of the rolled active file
	Skipped        map[string]string `json:"skipped"`   // files that compaction left, and why (no room)
}

func setupGC(fs *pflag.FlagSet, e *env) verbFunc {
	dry := fs.Bool("dry-run", false, "say what would be reclaimed; write nothing")
	return func(ctx context.Context, e *env, args []string) error { return runGC(ctx, e, args, *dry) }
}

func runGC(ctx context.Context, e *env, args []string, dry bool) error {
	if err := noArgs(args); err != nil {
		return err
	}
	db, err := openExisting(e)
	if err != nil {
		return err
	}
	defer db.Close()
	p := newProgress(e, "gc")
	p.stage("collecting")
	rep, err := db.GC(ctx, store.GCOptions{DryRun: dry, Progress: func(done, total int64) { p.update(done, total, true) }})
	p.done()
	if err != nil {
		return err
	}
	out := gcOf(rep)
	out.DryRun = dry
	return output(e, out, out.text)
}

func gcOf(rep *store.GCReport) *gcOutput {
	out := &gcOutput{FilesRemoved: nonNil(rep.FilesRemoved), RecordsRemoved: nonNil(rep.RecordsRemoved),
		BytesReclaimed: rep.BytesReclaimed, Rewritten: []uint32{}, Skipped: map[string]string{}}
	if rep.Compaction != nil {
		out.Rewritten = nonNil(rep.Compaction.Rewritten)
		for _, s := range rep.Compaction.Skipped {
			out.Skipped[fmt.Sprintf("%06d", s.Num)] = s.Reason
		}
	}
	return out
}

func nonNil(s []uint32) []uint32 {
	if s == nil {
		return []uint32{}
	}
	return s
}

func (o *gcOutput) text(w io.Writer) error {
	nums := make([]string, 0, len(o.Skipped))
	for n := range o.Skipped {
		nums = append(nums, n)
	}
	sort.Strings(nums)
	for _, n := range nums {
		fmt.Fprintf(w, "skipped %s.blob: %s\n", n, o.Skipped[n])
	}
	if o.DryRun {
		fmt.Fprint(w, "dry run: would have ")
	}
	_, err := fmt.Fprintf(w, "removed %d files and %d records, rewrote %d files, reclaimed %d bytes (%s)\n",
		len(o.FilesRemoved), len(o.RecordsRemoved), len(o.Rewritten), o.BytesReclaimed, humanBytes(o.BytesReclaimed))
	return err
}
