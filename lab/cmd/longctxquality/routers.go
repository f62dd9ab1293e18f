package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/lab/llama"
	"github.com/kvstore/kvstore/lab/quality"
	"github.com/kvstore/kvstore/lab/router"
	"github.com/kvstore/kvstore/store"
)

// routerFlags select the routed span methods: -routers, a store that
// "kvtrain router" wrote trained routers to (span+trained,
// span+trained+sum), and -oracle (span+oracle).
type routerFlags struct {
	dir, weights string
	oracle       bool
	bound        bool
	channels     int
	why          bool   // BoundWhy's table instead of the needle tables
	spread       bool   // print each needle table's median and worst needle
	scores       string // write each needle table's rows, with every needle's scores, as JSON lines here
}

func (r *routerFlags) define() {
	flag.StringVar(&r.dir, "routers", "", "store directory holding trained router artifacts (kvtrain router --dir): adds span+trained and span+trained+sum")
	flag.StringVar(&r.weights, "routers-weights-id", "", "weights id the routers are stored under (default llama2.c:<model file name>:<size>, kvtrain's)")
	flag.BoolVar(&r.spread, "spread", false, "after each needle table, the median and worst needle of each method")
	flag.StringVar(&r.scores, "scores", "", "append each needle table's rows, every needle's scores with them, to this file as JSON lines")
	flag.BoolVar(&r.bound, "bound", false, "add span+bound, span+bound+window (span memory zoomed by per-channel key bounds of each span), span+bound-ch, span+bound-ch+window (bounds on -bound-channels channels) and span+meankey, span+meankey+window (by its mean key post-RoPE), counted in the budget")
	flag.IntVar(&r.channels, "bound-channels", quality.DefaultBoundChannels, "span+bound-ch: channels per (layer, KV head) with per-span bounds")
	flag.BoolVar(&r.why, "boundwhy", false, "instead of the tables: on -needles single needles, the teacher's attention mass each routing signal's zoom set captures and the rank it gives the needle's span (quality.BoundWhy)")
	flag.BoolVar(&r.oracle, "oracle", false, "add span+oracle: span memory zoomed by the teacher's attention mass, the ceiling of routing (and span+heads+oracle with -heads)")
}

// load reads the trained routers of model m (its checkpoint at path), nil
// when -routers is not given.
func (r *routerFlags) load(m *llama.Model, path string) ([]router.Artifact, error) {
	if r.dir == "" {
		return nil, nil
	}
	weights := r.weights
	if weights == "" {
		st, err := os.Stat(path)
		if err != nil {
			return nil, err
		}
		weights = fmt.Sprintf("llama2.c:%s:%d", filepath.Base(path), st.Size())
	}
	db, err := store.Open(r.dir, &store.Options{ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("-routers %s: %w", r.dir, err)
	}
	defer db.Close()
	arts, err := router.Get(db, m.Spec(format.DTypeF32, weights).Fingerprint())
	if err != nil {
		return nil, fmt.Errorf("-routers %s: %w", r.dir, err)
	}
	return arts, nil
}

// writeScores appends rows to the -scores file as one JSON line.
func (r *routerFlags) writeScores(title string, rows []quality.NeedleRow) error {
	if r.scores == "" {
		return nil
	}
	f, err := os.OpenFile(r.scores, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if err := json.NewEncoder(f).Encode(map[string]any{"table": title, "rows": rows}); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// printSpread prints each row's median and worst needle: top-1 per byte
// and log-prob per byte.
func printSpread(rows []quality.NeedleRow) {
	fmt.Println("| budget | method | top-1 median | top-1 worst | log-prob median | log-prob worst |")
	fmt.Println("|---|---|---|---|---|---|")
	for _, r := range rows {
		var top, lp []float64
		for _, s := range r.Scores {
			top, lp = append(top, s.Top1), append(lp, s.LogProb)
		}
		fmt.Printf("| %s | %s | %.2f | %.2f | %.2f | %.2f |\n", budget(r.Budget), r.Method, quality.Median(top), slices.Min(top), quality.Median(lp), slices.Min(lp))
	}
	fmt.Println()
}

// runWhy prints quality.BoundWhy's table.
func runWhy(cfg quality.NeedleConfig) error {
	rows, skipped, err := quality.BoundWhy(cfg)
	if err != nil {
		return err
	}
	fmt.Printf("Routing signals at the value's steps, teacher-forced with full attention: %d needles (%d left out), seed %d, bound-ch on %d channels\n\n", cfg.Needles-skipped, skipped, cfg.Seed, cfg.BoundChannels)
	fmt.Println("| budget | signal | spans | zoom rows/layer (span's / own) | mass captured at span's zoom (mean / median / worst) | at own zoom (mean / median / worst) | needle span rank where the teacher's top (median / worst, count) |")
	fmt.Println("|---|---|---|---|---|---|---|")
	for _, r := range rows {
		fmt.Printf("| %s | %s | %.0f | %.0f / %.0f | %.2f / %.2f / %.2f | %.2f / %.2f / %.2f | %.0f / %.0f, %d |\n", budget(r.Budget), r.Signal, r.Spans, r.Zoom, r.OwnZoom,
			quality.Mean(r.Captured), quality.Median(r.Captured), slices.Min(r.Captured), quality.Mean(r.OwnCaptured), quality.Median(r.OwnCaptured), slices.Min(r.OwnCaptured),
			quality.Median(r.Rank), slices.Max(r.Rank), len(r.Rank))
	}
	fmt.Println()
	return nil
}
