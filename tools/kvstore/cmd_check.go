package main

import (
	"context"
	"fmt"
	"io"

	"github.com/kvstore/kvstore/store"
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

type checkOutput struct {
	Files        int          `json:"files"`
	Packets      int          `json:"packets"`
	SpanMemories int          `json:"span_memories"`
	Findings     []findingOut `json:"findings"`
	Garbage      []garbageOut `json:"garbage"`
	GarbageBytes uint64       `json:"garbage_bytes"`
}

type garbageOut struct {
	Kind    string `json:"kind"`
	File    string `json:"file"`
	Offset  uint64 `json:"offset"`
	Length  uint64 `json:"length"`
	Extents int    `json:"extents"`
	Reused  bool   `json:"reused"`
}

func runCheck(ctx context.Context, e *env, args []string) error {
	if err := noArgs(args); err != nil {
		return err
	}
	db, err := openStore(e, false)
	if err != nil {
		return err
	}
	defer db.Close()
	p := newProgress(e, "check")
	rep, err := db.Check(ctx, func(done, total int64) { p.update(done, total, false) })
	p.done()
	if err != nil {
		return err
	}
	out := checkOutput{Files: rep.Files, Packets: rep.Packets, SpanMemories: rep.SpanMemories,
		Findings: findingsOf(rep.Findings), Garbage: garbageOf(rep.Garbage), GarbageBytes: rep.GarbageBytes}
	if err := output(e, out, out.text); err != nil {
		return err
	}
	if !rep.OK() {
		return fmt.Errorf("%d findings", len(rep.Findings))
	}
	return nil
}

func garbageOf(gs []store.Garbage) []garbageOut {
	out := []garbageOut{}
	for _, g := range gs {
		out = append(out, garbageOut{Kind: string(g.Kind), File: g.File, Offset: g.Offset, Length: g.Length,
			Extents: g.Extents, Reused: g.Reused})
	}
	return out
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
