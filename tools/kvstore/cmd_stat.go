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
	register(&command{name: "stat", summary: "store totals, per namespace and model, and per blob file", long: statSummary,
		setup: func(fs *pflag.FlagSet, e *env) verbFunc { addrFlag(fs, e); return runStat }})
}

const statSummary = `Prints the store's totals (packets, span memories, live and dead bytes,
blob files), then packets, tokens and bytes per namespace and model, then
each blob file's size, live and dead bytes, live ratio and extents.`

// statOutput is stat's output: the admin handler's /stats.
type statOutput admin.Stats

func runStat(ctx context.Context, e *env, args []string) error {
	if err := noArgs(args); err != nil {
		return err
	}
	out, err := report(ctx, e, "/stats", nil, func(db *store.DB) (*statOutput, error) {
		s, err := admin.StatsOf(db)
		return (*statOutput)(s), err
	})
	if err != nil {
		return err
	}
	return output(e, out, out.text)
}

func (o *statOutput) text(w io.Writer) error {
	fmt.Fprintf(w, "packets %d, span memories %d, live %d bytes (%s), dead %d bytes (%s), %d blob files\n\n",
		o.Packets, o.SpanMemories, o.LiveBytes, humanBytes(o.LiveBytes), o.DeadBytes, humanBytes(o.DeadBytes), len(o.Files))
	t := newTable(w, "NAMESPACE", "MODEL", "PACKETS", "TOKENS", "BYTES")
	for _, g := range o.Groups {
		t.row(fmt.Sprintf("%q", g.Namespace), g.Model[:16], g.Packets, g.Tokens, humanBytes(g.Bytes))
	}
	if err := t.flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	t = newTable(w, "FILE", "SIZE", "LIVE", "DEAD", "LIVE%", "EXTENTS", "SEALED")
	for _, f := range o.Files {
		t.row(fmt.Sprintf("%06d.blob", f.Num), humanBytes(f.Size), humanBytes(f.LiveBytes), humanBytes(f.DeadBytes), fmt.Sprintf("%.1f", 100*f.LiveRatio),
			fmt.Sprintf("%d/%d", f.LiveExtents, f.Extents), f.Sealed)
	}
	return t.flush()
}
