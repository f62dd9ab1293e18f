package main

import (
	"context"
	"fmt"
	"github.com/spf13/pflag"
	"io"
	"strconv"
	"strings"

	"github.com/kvstore/kvstore/store"
)

func init() {
	register(&command{name: "compact", summary: "rewrite blob files whose live ratio is low", long: compactSummary, setup: setupCompact})
}

const compactSummary = `Rewrites blob files whose live bytes are below --ratio of their extent
bytes (store.Compact): live extents are copied, verified on the way, to new
files, the catalog is repointed in one synced batch, and the old files are
removed. --files picks files by number instead. Crash-safe and idempotent.`

type compactOutput struct {
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
	return func(ctx context.Context, e *env, args []string) error {
		return runCompact(ctx, e, args, *ratio, *files)
	}
}

func runCompact(ctx context.Context, e *env, args []string, ratio float64, files string) error {
	if err := noArgs(args); err != nil {
		return err
	}
	o := store.CompactOptions{LiveRatio: ratio}
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
	p := newProgress(e, "compact")
	o.Progress = func(done, total int64) { p.update(done, total, true) }
	rep, err := db.Compact(ctx, o)
	p.done()
	if err != nil {
		return err
	}
	out := compactOutput{Rewritten: nonNil(rep.Rewritten), Created: nonNil(rep.Created), Extents: rep.Extents,
		BytesCopied: rep.BytesCopied, BytesReclaimed: rep.BytesReclaimed, Skipped: map[string]string{}}
	for _, s := range rep.Skipped {
		out.Skipped[fmt.Sprintf("%06d", s.Num)] = s.Reason
	}
	return output(e, out, out.text)
}

func (o *compactOutput) text(w io.Writer) error {
	for n, why := range o.Skipped {
		fmt.Fprintf(w, "skipped %s.blob: %s\n", n, why)
	}
	fmt.Fprintf(w, "rewrote %d files into %d, moved %d extents (%d bytes), reclaimed %d bytes (%s)\n",
		len(o.Rewritten), len(o.Created), o.Extents, o.BytesCopied, o.BytesReclaimed, humanBytes(o.BytesReclaimed))
	return nil
}
