//go:build (linux || darwin) && (amd64 || arm64)

// Command longctxllama measures span memory served to llama.cpp on
// gocode-2k (lab/quality.RunLlamaNeedles): single needles, the same as
// longctxquality's for the same -needles and -seed, decoded teacher-forced
// with full KV and with span memory at each budget, in the lab's decode
// loop (per-step routing, and the request-time row sets) and through
// llama.cpp (the request-time row sets loaded into a sequence), and prints
// the table of docs/quality.md's "Span memory through llama.cpp":
//
//	KVSTORE_LLAMA_LIB=$(sh scripts/install-libllama.sh) go run ./lab/cmd/longctxllama -needles 12
package main

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"time"

	"github.com/kvstore/kvstore/lab/quality"
	"github.com/kvstore/kvstore/llamacpp"
)

func main() {
	needles := flag.Int("needles", 24, "single needles")
	window := flag.Int("window", 2048, "window tokens (gocode-2k's seq_len: 2048)")
	budgets := flag.String("budgets", "0.10,0.25", "GPU budgets, fractions of the context KV")
	seed := flag.Uint64("seed", 1, "seed of the needles and of the files' order")
	threads := flag.Int("threads", 1, "llama.cpp CPU threads")
	anchorShare := flag.Float64("anchor-share", quality.DefaultAnchorShare, "span memory: the most of the budget its resident anchors take")
	anchorAlpha := flag.Float64("anchor-alpha", 0, "span memory: tokens above mean + this many standard deviations of surprisal are anchors (0: segment's default)")
	flag.Parse()
	span := quality.Config{AnchorShare: *anchorShare}
	span.Segment.AnchorAlpha = *anchorAlpha
	if err := run(*needles, *window, *budgets, *seed, *threads, span); err != nil {
		fmt.Fprintln(os.Stderr, "longctxllama:", err)
		os.Exit(1)
	}
}

func run(needles, window int, budgetList string, seed uint64, threads int, span quality.Config) error {
	budgets, err := quality.ParseFloats(budgetList)
	if err != nil {
		return err
	}
	m, p, err := quality.LoadGoCode2k()
	if err != nil {
		return err
	}
	lib, err := llamacpp.Open(llamacpp.Options{})
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "longctxllama-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	g, err := quality.WriteGGUF(p, dir)
	if err != nil {
		return err
	}
	e, err := lib.LoadModel(g)
	if err != nil {
		return err
	}
	defer e.Close()
	all, root, err := quality.HeldOutGoSrc(window)
	if err != nil {
		return err
	}
	if len(all) == 0 {
		return fmt.Errorf("no held-out file of %d bytes under %s", window, root)
	}
	// The files' order of longctxquality: the same needles.
	rand.New(rand.NewPCG(seed, 0x66696c65)).Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
	start := time.Now()
	rows, skipped, err := quality.RunLlamaNeedles(quality.LlamaNeedleConfig{
		NeedleConfig: quality.NeedleConfig{LongConfig: quality.LongConfig{Model: m, Budgets: budgets, Span: span},
			Files: all, Window: window, Needles: needles, Keys: 1, Seed: seed,
			Progress: func(i int, nd *quality.Needle, err error) {
				fmt.Fprintf(os.Stderr, "needle %d/%d (depth %.2f) %v %v\n", i+1, needles, nd.Depth, time.Since(start).Round(time.Second), err)
			}},
		Engine: e, Threads: threads})
	if err != nil {
		return err
	}
	fmt.Printf("gocode-2k, single needles in windows of %d tokens: %d measured (%d left out: span memory not built), seed %d\n\n", window, needles-skipped, skipped, seed)
	fmt.Println("| budget | method | engine | log-prob/byte | top-1/byte | exact | rows (max) | max \\|logit diff\\| vs lab, same rows |")
	fmt.Println("|---|---|---|---|---|---|---|---|")
	for _, r := range rows {
		diff := "-"
		if r.Engine == quality.EngineLlama {
			diff = fmt.Sprintf("%.1e", r.MaxDiff)
		}
		over := ""
		if r.Over {
			over = " (over)"
		}
		fmt.Printf("| %s | %s | %s | %.2f | %.2f | %d/%d | %.1f%%%s | %s |\n", budget(r.Budget), r.Method, r.Engine, r.LogProb, r.Top1, r.Exact, r.Needles, 100*r.Rows, over, diff)
	}
	fmt.Fprintf(os.Stderr, "done in %v\n", time.Since(start).Round(time.Second))
	return nil
}

func budget(f float64) string {
	if f == 1 {
		return "100%"
	}
	return fmt.Sprintf("%g%%", 100*f)
}
