package main

import (
	"context"
	"fmt"
	"io"

	"github.com/kvstore/kvstore/store"
	"github.com/kvstore/kvstore/store/admin"
	"github.com/spf13/pflag"
)

func init() {
	register(&command{name: "check", summary: "check catalog <-> blob file consistency", long: checkSummary,
		setup: func(fs *pflag.FlagSet, e *env) verbFunc { addrFlag(fs, e); return runCheck }})
}

const checkSummary = `Checks the catalog against the blob files without reading payloads
(store.Check): dangling references, overlapping extents, orphaned index
entries or headers, missing model specs, bad blob headers and space
accounting. Unreferenced space that a crash may leave (garbage, which gc
reclaims) is listed apart and is not a finding. Exits 1 on any finding;
a healthy store has none.`

// checkOutput is check's output: the admin handler's /check.
type checkOutput admin.Check

func runCheck(ctx context.Context, e *env, args []string) error {
	if err := noArgs(args); err != nil {
		return err
	}
	out, err := report(ctx, e, "/check", nil, func(db *store.DB) (*checkOutput, error) {
		p := newProgress(e, "check")
		rep, err := db.Check(ctx, store.CheckOptions{Progress: func(done, total int64) { p.update(done, total, false) }})
		p.done()
		if err != nil {
			return nil, err
		}
		return (*checkOutput)(admin.CheckOf(rep)), nil
	})
	if err != nil {
		return err
	}
	return outputFindings(e, out, out.text, len(out.Findings))
}

func (o *checkOutput) text(w io.Writer) error {
	for _, f := range o.Findings {
		fmt.Fprintln(w, f.Text)
	}
	for _, g := range o.Garbage {
		fmt.Fprintf(w, "garbage %s: file %s offset %d (%d bytes, %d extents)\n", g.Kind, g.File, g.Offset, g.Length, g.Extents)
	}
	fmt.Fprintf(w, "checked %d blob files, %d packets, %d span memories: %d findings, %d bytes of garbage\n",
		o.Files, o.Packets, o.SpanMemories, len(o.Findings), o.GarbageBytes)
	return nil
}
