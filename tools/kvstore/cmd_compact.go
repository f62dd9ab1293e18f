package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	"github.com/kvstore/kvstore/store"
	"github.com/spf13/pflag"
)

func init() {
	register(&command{name: "compact", summary: "rewrite blob files whose live ratio is low", long: compactSummary, setup: setupCompact})
}

const compactSummary = `Rewrites blob files whose live bytes are below --ratio of their extent
bytes (store.Compact): live extents are copied, verified on the way, to new
files, the catalog is repointed in one synced batch, and the old files are
removed. --files picks files by number instead. The active file (the one
being appended to) is rolled first when chosen: sealed, so that the next
write starts a new file, and rewritten like any other. It commits group by
group (at most a blob file's size of live bytes each), so its extra space is
bounded; a group the disk has no room for is skipped, with the room it
needs, and the next is tried. An interrupted compact keeps the groups
already committed and removes the file it was writing. --dry-run says what
would be rewritten and writes nothing. Crash-safe and idempotent.`

type compactOutput struct {
	DryRun         bool              `json:"dry_run"`
	Rewritten      []uint32          `json:"rewritten"`
	Created        []uint32          `json:"created"`
	Extents        int               `json:"extents"`
	BytesCopied    uint64            `json:"bytes_copied"`
	BytesReclaimed uint64            `json:"bytes_reclaimed"`
	Skipped        map[string]string `json:"skipped"`
}

func setupCompact(fs *pflag.FlagSet, e *env) verbFunc {
	ratio := fs.Float64("ratio", 0, "rewrite files whose live ratio is below this (0: the store's default; 1: any dead byte)")
	files := fs.String("files", "", "rewrite these blob file numbers (comma-separated) whatever their ratio")
	dry := fs.Bool("dry-run", false, "say what would be rewritten; write nothing")
	return func(ctx context.Context, e *env, args []string) error {
		return runCompact(ctx, e, args, *ratio, *files, *dry)
	}
}

func runCompact(ctx context.Context, e *env, args []string, ratio float64, files string, dry bool) error {
	if err := noArgs(args); err != nil {
		return err
	}
	o := store.CompactOptions{LiveRatio: ratio, DryRun: dry}
	if ratio < 0 || ratio > 1 {
		return fmt.Errorf("%w: --ratio %v not in [0, 1]", errUsage, ratio)
	}
	if files != "" {
		for _, s := range strings.Split(files, ",") {
			n, err := strconv.ParseUint(strings.TrimSpace(s), 10, 32)
			if err != nil {
				return fmt.Errorf("%w: --files: %q is not a blob file number", errUsage, s)
			}
			o.Files = append(o.Files, uint32(n))
		}
	}
	db, err := openExisting(e)
	if err != nil {
		return err
	}
	defer db.Close()
	if o.LiveRatio == 0 {
		o.LiveRatio = store.DefaultCompactLiveRatio
	}
	left, err := compactLeft(db.BlobFiles(), &o)
	if err != nil {
		return err
	}
	p := newProgress(e, "compact")
	o.Progress = func(done, total int64) { p.update(done, total, true) }
	rep, err := db.Compact(ctx, o)
	p.done()
	if err != nil {
		return err
	}
	out := compactOutput{DryRun: dry, Rewritten: nonNil(rep.Rewritten), Created: nonNil(rep.Created), Extents: rep.Extents,
		BytesCopied: rep.BytesCopied, BytesReclaimed: rep.BytesReclaimed, Skipped: left}
	for _, s := range rep.Skipped {
		out.Skipped[fmt.Sprintf("%06d", s.Num)] = s.Reason
	}
	return output(e, out, out.text)
}

// compactLeft says, per blob file that Compact will not rewrite under o,
// why: no dead byte, or a live ratio at or above o.LiveRatio. The active
// file is no exception: Compact rolls it (seals it) when it is chosen. A
// --files number the store does not hold is an error (ErrNotFound), not
// something to ignore. Files the disk has no room to rewrite are known
// only once Compact runs: its report lists them.
func compactLeft(files []store.BlobFileInfo, o *store.CompactOptions) (map[string]string, error) {
	have := map[uint32]bool{}
	for _, f := range files {
		have[f.Num] = true
	}
	for _, n := range o.Files {
		if !have[n] {
			return nil, fmt.Errorf("%w: --files: the store has no blob file %06d", store.ErrNotFound, n)
		}
	}
	left := map[string]string{}
	if len(o.Files) > 0 {
		return left, nil // the files asked for are rewritten whatever their ratio
	}
	for _, f := range files {
		used := f.LiveBytes + f.DeadBytes
		why := ""
		switch {
		case f.DeadBytes == 0:
			why = "no dead bytes"
		case float64(f.LiveBytes) >= o.LiveRatio*float64(used):
			why = fmt.Sprintf("live ratio %.1f%% is not below %.1f%%", 100*float64(f.LiveBytes)/float64(used), 100*o.LiveRatio)
		default:
			continue // to be rewritten
		}
		left[fmt.Sprintf("%06d", f.Num)] = why
	}
	return left, nil
}

func (o *compactOutput) text(w io.Writer) error {
	nums := make([]string, 0, len(o.Skipped))
	for n := range o.Skipped {
		nums = append(nums, n)
	}
	sort.Strings(nums)
	for _, n := range nums {
		fmt.Fprintf(w, "skipped %s.blob: %s\n", n, o.Skipped[n])
	}
	verb := "rewrote"
	if o.DryRun {
		verb = "dry run: would rewrite"
	}
	fmt.Fprintf(w, "%s %d files into %d, moved %d extents (%s), reclaimed %s\n",
		verb, len(o.Rewritten), len(o.Created), o.Extents, humanBytes(o.BytesCopied), humanBytes(o.BytesReclaimed))
	return nil
}
