package main

import (
	"context"
	"fmt"
	"io"
	"sort"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/store"
	"github.com/spf13/pflag"
)

func init() {
	register(&command{name: "stat", summary: "store totals, per namespace and model, and per blob file", long: statSummary,
		setup: func(fs *pflag.FlagSet, e *env) verbFunc { addrFlag(fs, e); return runStat }})
}

const statSummary = `Prints the store's totals (packets, span memories, live and dead bytes,
blob files), then packets, tokens and bytes per namespace and model, then
each blob file's size, live and dead bytes, live ratio and extents.`

type statOutput struct {
	Packets      uint64        `json:"packets"`
	SpanMemories uint64        `json:"span_memories"`
	LiveBytes    uint64        `json:"live_bytes"` // packets' and span memories' extents
	DeadBytes    uint64        `json:"dead_bytes"`
	Groups       []statGroup   `json:"groups"`
	Files        []statFileOut `json:"blob_files"`
}

type statGroup struct {
	Namespace string `json:"namespace"`
	Model     string `json:"model"`
	Packets   int    `json:"packets"`
	Tokens    uint64 `json:"tokens"`
	Bytes     uint64 `json:"bytes"`
}

type statFileOut struct {
	Num         uint32  `json:"num"`
	Path        string  `json:"path"`
	Size        uint64  `json:"size"`
	LiveBytes   uint64  `json:"live_bytes"`
	DeadBytes   uint64  `json:"dead_bytes"`
	LiveRatio   float64 `json:"live_ratio"`
	Extents     uint32  `json:"extents"`
	LiveExtents uint32  `json:"live_extents"`
	Sealed      bool    `json:"sealed"`
}

func runStat(ctx context.Context, e *env, args []string) error {
	if err := noArgs(args); err != nil {
		return err
	}
	db, err := openStore(e, false)
	if err != nil {
		return err
	}
	defer db.Close()
	out, err := statOf(db)
	if err != nil {
		return err
	}
	return output(e, out, out.text)
}

func statOf(db *store.DB) (*statOutput, error) {
	s := db.Stats()
	out := &statOutput{Packets: s.Packets, SpanMemories: s.SpanMemories, LiveBytes: s.LiveBytes, DeadBytes: s.DeadBytes,
		Groups: []statGroup{}, Files: []statFileOut{}}
	groups := map[[2]string]*statGroup{}
	err := db.Headers(func(h *format.PacketHeader) error {
		k := [2]string{h.Namespace, h.Model.String()}
		g := groups[k]
		if g == nil {
			g = &statGroup{Namespace: k[0], Model: k[1]}
			groups[k] = g
		}
		g.Packets++
		g.Tokens += uint64(h.Tokens)
		g.Bytes += h.ExtentLength
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, g := range groups {
		out.Groups = append(out.Groups, *g)
	}
	sort.Slice(out.Groups, func(i, j int) bool {
		a, b := out.Groups[i], out.Groups[j]
		return a.Namespace < b.Namespace || (a.Namespace == b.Namespace && a.Model < b.Model)
	})
	for _, f := range s.BlobFiles {
		ratio := 0.0
		if used := f.LiveBytes + f.DeadBytes; used > 0 {
			ratio = float64(f.LiveBytes) / float64(used)
		}
		out.Files = append(out.Files, statFileOut{Num: f.Num, Path: f.Path, Size: f.Size, LiveBytes: f.LiveBytes,
			DeadBytes: f.DeadBytes, LiveRatio: ratio, Extents: f.Extents, LiveExtents: f.LiveExtents, Sealed: f.Sealed})
	}
	return out, nil
}

func (o *statOutput) text(w io.Writer) error {
	fmt.Fprintf(w, "packets %d, span memories %d, live %d bytes (%s), dead %d bytes (%s), %d blob files\n\n",
		o.Packets, o.SpanMemories, o.LiveBytes, humanBytes(o.LiveBytes), o.DeadBytes, humanBytes(o.DeadBytes), len(o.Files))
	t := newTable(w, "NAMESPACE", "MODEL", "PACKETS", "TOKENS", "BYTES")
	for _, g := range o.Groups {
		t.row(fmt.Sprintf("%q", g.Namespace), g.Model[:16], g.Packets, g.Tokens, g.Bytes)
	}
	if err := t.flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	t = newTable(w, "FILE", "SIZE", "LIVE", "DEAD", "LIVE%", "EXTENTS", "SEALED")
	for _, f := range o.Files {
		t.row(fmt.Sprintf("%06d.blob", f.Num), f.Size, f.LiveBytes, f.DeadBytes, fmt.Sprintf("%.1f", 100*f.LiveRatio),
			fmt.Sprintf("%d/%d", f.LiveExtents, f.Extents), f.Sealed)
	}
	return t.flush()
}
