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
//
// -heads N measures span+heads instead (span memory on the retrieval
// heads, a window on the others, the heads measured first on N needles of
// non-test Go as longctxquality's -heads does): per step in the lab loop,
// as the tables measure it and with every KV head at the budget's rows,
// and its request-time row set (span+heads@request) on both engines. The
// memory's flags are longctxquality's.
package main

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"time"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/lab/quality"
	"github.com/kvstore/kvstore/llamacpp"
)

func main() {
	needles := flag.Int("needles", 24, "needles")
	keys := flag.Int("keys", 1, "definitions per needle, one recalled (1: single needles; longctxquality's multi-needles: 4)")
	window := flag.Int("window", 2048, "window tokens (gocode-2k's seq_len: 2048)")
	budgets := flag.String("budgets", "0.10,0.25", "GPU budgets, fractions of the context KV")
	seed := flag.Uint64("seed", 1, "seed of the needles and of the files' order")
	threads := flag.Int("threads", 1, "llama.cpp CPU threads")
	anchorShare := flag.Float64("anchor-share", quality.DefaultAnchorShare, "span memory: the most of the budget its resident anchors take")
	anchorAlpha := flag.Float64("anchor-alpha", 0, "span memory: tokens above mean + this many standard deviations of surprisal are anchors (0: segment's default)")
	sizeRule := flag.Bool("sizerule", false, "span memory: the store's size rule (spans factored only where that makes the memory smaller)")
	rawSpans := flag.Bool("raw-spans", false, "-sizerule: keep the unfactored spans as the segmentation cut them")
	resTail := flag.Float64("resident-tail", 0, "span memory: keep the spans holding this share of the context's last tokens unfactored")
	energy := flag.Float64("energy", 0, "span memory: the factors' SVD energy threshold (0: 0.99)")
	rowDType := flag.String("dtype", "f32", "span memory: its resident rows' dtype (f32 or bf16)")
	var hf headFlags
	flag.IntVar(&hf.n, "heads", 0, "measure span+heads in place of span and span+anchor, the retrieval heads measured first on this many single needles of non-test Go")
	flag.Uint64Var(&hf.seed, "heads-seed", 99, "-heads: seed of the training needles")
	flag.Float64Var(&hf.mass, "retrieval-mass", quality.DefaultRetrievalMass, "-heads: a KV head whose attention on the needle's definition line is at least this share is a retrieval head")
	flag.Float64Var(&hf.tau, "zoom-tau", 0, "-heads: the least anchor attention a span needs to be zoomed (0: the budget alone caps the zoom)")
	flag.IntVar(&hf.rank, "stream-rank", 0, "-heads: store this factor rank for the streaming heads, the retrieval heads' chosen by -energy (0: every head's by -energy)")
	flag.Parse()
	dt, err := format.ParseDType(*rowDType)
	if err != nil {
		fmt.Fprintln(os.Stderr, "longctxllama: -dtype:", err)
		os.Exit(2)
	}
	span := quality.Config{AnchorShare: *anchorShare, SizeRule: *sizeRule, RawSpans: *rawSpans, ResidentTail: *resTail, Energy: *energy, RowDType: dt}
	span.Segment.AnchorAlpha = *anchorAlpha
	if err := run(*needles, *keys, *window, *budgets, *seed, *threads, span, hf); err != nil {
		fmt.Fprintln(os.Stderr, "longctxllama:", err)
		os.Exit(1)
	}
}

// headFlags select span+heads (-heads).
type headFlags struct {
	n         int
	seed      uint64
	mass, tau float64
	rank      int
}

func run(needles, keys, window int, budgetList string, seed uint64, threads int, span quality.Config, hf headFlags) error {
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
	lc := quality.LongConfig{Model: m, Budgets: budgets, Span: span, ZoomTau: hf.tau}
	if hf.n > 0 {
		files, _, err := quality.TrainingGoSrc(window)
		if err != nil {
			return err
		}
		mass, err := quality.HeadRetrievalOn(quality.NeedleConfig{LongConfig: lc, Files: files, Window: window, Needles: hf.n, Seed: hf.seed})
		if err != nil {
			return fmt.Errorf("-heads: %w", err)
		}
		lc.Retrieval = quality.RetrievalHeads(mass, hf.mass)
		lc.Span.HeadRank = quality.StreamRank(lc.Retrieval, hf.rank)
		fmt.Printf("Retrieval heads (%d needles of non-test Go, seed %d, attention on the definition line >= %.2f):", hf.n, hf.seed, hf.mass)
		for gi, r := range lc.Retrieval {
			if r {
				fmt.Printf(" layer %d KV head %d (%.3f)", gi/m.KVHeads, gi%m.KVHeads, mass[gi])
			}
		}
		fmt.Print("\n\n")
	}
	start := time.Now()
	rows, skipped, err := quality.RunLlamaNeedles(quality.LlamaNeedleConfig{
		NeedleConfig: quality.NeedleConfig{LongConfig: lc,
			Files: all, Window: window, Needles: needles, Keys: keys, Seed: seed,
			Progress: func(i int, nd *quality.Needle, err error) {
				fmt.Fprintf(os.Stderr, "needle %d/%d (depth %.2f) %v %v\n", i+1, needles, nd.Depth, time.Since(start).Round(time.Second), err)
			}},
		Engine: e, Threads: threads})
	if err != nil {
		return err
	}
	fmt.Printf("gocode-2k, needles of %d definitions (one recalled) in windows of %d tokens: %d measured (%d left out: span memory not built), seed %d\n\n", keys, window, needles-skipped, skipped, seed)
	fmt.Println("| budget | method | engine | log-prob/byte | top-1/byte (median / worst) | exact | rows (max) | max \\|logit diff\\| vs lab, same rows |")
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
		fmt.Printf("| %s | %s | %s | %.2f | %.2f (%.2f / %.2f) | %d/%d | %.1f%%%s | %s |\n", budget(r.Budget), r.Method, r.Engine, r.LogProb, r.Top1,
			quality.Median(r.Top1s), slices.Min(r.Top1s), r.Exact, r.Needles, 100*r.Rows, over, diff)
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
