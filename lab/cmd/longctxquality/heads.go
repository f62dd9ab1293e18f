package main

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"time"

	"github.com/kvstore/kvstore/lab/quality"
)

// headFlags select span+heads: -heads N training needles measure which
// KV heads retrieve (quality.HeadRetrieval), before any table.
type headFlags struct {
	n      int
	seed   uint64
	mass   float64
	stream float64
	cap    float64
	tau    float64
	tauAt  string
	rel    float64
	gate   float64
	within bool
	top    float64
	train  bool
	depth  bool
	fit    int
	rank   int
}

func (h *headFlags) define() {
	flag.IntVar(&h.n, "heads", 0, "add span+heads (span memory on the retrieval heads, a recent window on the others) and span+heads+router (its zoom ranked by SeKV's untrained routers), the retrieval heads measured first on this many single needles of non-test Go (training text, not the tables')")
	flag.Uint64Var(&h.seed, "heads-seed", 99, "-heads: seed of the training needles")
	flag.Float64Var(&h.mass, "retrieval-mass", quality.DefaultRetrievalMass, "-heads: a KV head whose attention on the needle's definition line is at least this share is a retrieval head")
	flag.Float64Var(&h.stream, "stream-share", quality.DefaultStreamShare, "span+heads: the share of the budget a streaming head keeps (sinks and the last rows)")
	flag.Float64Var(&h.cap, "retrieval-cap", 0, "span+heads: the most of the context a retrieval head keeps (0: no cap), the streaming heads' windows taking the rest")
	flag.Float64Var(&h.tau, "zoom-tau", 0, "span+heads: the least anchor attention a span needs to be zoomed (0: the budget alone caps the zoom)")
	flag.StringVar(&h.tauAt, "zoom-tau-head", "", "span+heads: -zoom-tau of single KV heads, as layer.head=tau pairs separated by commas (1: that head never zooms)")
	flag.Float64Var(&h.rel, "zoom-rel", 0, "span+heads: the share of a KV head's highest span score a span needs to be zoomed (0: none)")
	flag.Float64Var(&h.top, "stream-top", 0, "span+heads: the share of a streaming head's rows that are the rows of highest surprisal before its window (0: the window alone)")
	flag.Float64Var(&h.gate, "zoom-gate", 0, "span+heads: -zoom-tau and -zoom-rel apply to a KV head at a step only when its best span score reaches this (0: at every step); span+heads+oracle, +router and +trained rank by their routers only below it")
	flag.BoolVar(&h.within, "rank-within", false, "span+heads+oracle, +router, +trained, +fit: rank only the spans whose anchor score passes -zoom-tau and -zoom-rel (at every step, or above -zoom-gate), the budget alone capping those")
	flag.BoolVar(&h.depth, "heads-depth", false, "-heads: also print each KV head's share per third of the needles' depths (the same needles, measured again by third)")
	flag.IntVar(&h.fit, "fit-rank", 0, "-heads: add span+heads+fit, its zoom ranked (below -zoom-gate) by a ranker fitted to the teacher's attention mass on this many needles and as many windows of non-test Go (seed -heads-seed), fitted first")
	flag.IntVar(&h.rank, "stream-rank", 0, "-heads: store this factor rank for the streaming heads (the model's rank artifact), the retrieval heads' chosen by -energy (0: every head's by -energy)")
	flag.BoolVar(&h.train, "train-files", false, "draw the needles and windows from non-test Go (training text) instead of the held-out _test.go files: for choosing settings")
}

// headTau is -zoom-tau-head as quality.LongConfig.ZoomTauHead for a
// model of layers x kvHeads KV heads; nil when not given.
func (h *headFlags) headTau(layers, kvHeads int) ([]float64, error) {
	if h.tauAt == "" {
		return nil, nil
	}
	out := make([]float64, layers*kvHeads)
	for _, pair := range strings.Split(h.tauAt, ",") {
		var l, g int
		var t float64
		if n, err := fmt.Sscanf(strings.TrimSpace(pair), "%d.%d=%g", &l, &g, &t); err != nil || n != 3 {
			return nil, fmt.Errorf("-zoom-tau-head: %q is not layer.head=tau", pair)
		}
		if l < 0 || l >= layers || g < 0 || g >= kvHeads {
			return nil, fmt.Errorf("-zoom-tau-head: %q: no KV head %d of layer %d in a model of %d layers of %d", pair, g, l, layers, kvHeads)
		}
		if !(t >= 0 && t <= 1) {
			return nil, fmt.Errorf("-zoom-tau-head: %q: tau must lie in [0, 1]", pair)
		}
		out[l*kvHeads+g] = t
	}
	return out, nil
}

// retrieval measures the retrieval heads on -heads needles of non-test Go
// under GOROOT/src, printing each KV head's mass; nil without -heads.
func (h *headFlags) retrieval(lc quality.LongConfig, window int) ([]bool, error) {
	if h.n == 0 {
		return nil, nil
	}
	files, _, err := quality.TrainingGoSrc(window)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(os.Stderr, "retrieval heads: %d training needles from %d non-test files\n", h.n, len(files))
	cfg := quality.NeedleConfig{LongConfig: lc, Files: files, Window: window, Needles: h.n, Seed: h.seed}
	mass, err := quality.HeadRetrievalOn(cfg)
	if err != nil {
		return nil, fmt.Errorf("-heads: %w", err)
	}
	heads := quality.RetrievalHeads(mass, h.mass)
	fmt.Printf("Retrieval heads (attention on the definition line, %d needles of non-test Go, seed %d; retrieval at >= %.2f):\n", h.n, h.seed, h.mass)
	for gi, v := range mass {
		mark := ""
		if heads[gi] {
			mark = " retrieval"
		}
		fmt.Printf("  layer %d, KV head %d: %.3f%s\n", gi/lc.Model.KVHeads, gi%lc.Model.KVHeads, v, mark)
	}
	fmt.Println()
	if h.depth {
		thirds, count, err := quality.HeadRetrievalByDepth(cfg)
		if err != nil {
			return nil, fmt.Errorf("-heads-depth: %w", err)
		}
		fmt.Println("By depth of the definition (needles at 0-.3 / .3-.6 / .6-.9):")
		fmt.Printf("  needles: %d / %d / %d\n", count[0], count[1], count[2])
		for gi := range mass {
			fmt.Printf("  layer %d, KV head %d:", gi/lc.Model.KVHeads, gi%lc.Model.KVHeads)
			for i, m := range thirds {
				sep := " /"
				if i == 0 {
					sep = ""
				}
				if m == nil {
					fmt.Printf("%s -", sep)
					continue
				}
				fmt.Printf("%s %.3f", sep, m[gi])
			}
			fmt.Println()
		}
		fmt.Println()
	}
	return heads, nil
}

// rankFit fits span+heads+fit's ranker on -fit-rank needles and windows
// of non-test Go under GOROOT/src (seed -heads-seed) with lc's settings,
// printing its fit; nil without -fit-rank.
func (h *headFlags) rankFit(lc quality.LongConfig, window, tail int) (*quality.RankFit, error) {
	if h.fit == 0 {
		return nil, nil
	}
	if lc.Retrieval == nil {
		return nil, fmt.Errorf("-fit-rank needs -heads")
	}
	files, _, err := quality.TrainingGoSrc(window)
	if err != nil {
		return nil, err
	}
	rand.New(rand.NewPCG(h.seed, 0x66696c65)).Shuffle(len(files), func(i, j int) { files[i], files[j] = files[j], files[i] })
	start := time.Now()
	needles := quality.NeedleConfig{LongConfig: lc, Files: files, Window: window, Needles: h.fit, Keys: 1, Seed: h.seed,
		Progress: func(i int, nd *quality.Needle, err error) {
			fmt.Fprintf(os.Stderr, "fit-rank needle %d/%d %v %v\n", i+1, h.fit, time.Since(start).Round(time.Second), errText(err))
		}}
	text := quality.LongTextConfig{LongConfig: lc, Files: files[len(files)-min(h.fit, len(files)):], Window: window, Tail: tail,
		Progress: func(i int, f string, err error) {
			fmt.Fprintf(os.Stderr, "fit-rank window %d/%d %v %v\n", i+1, h.fit, time.Since(start).Round(time.Second), errText(err))
		}}
	fit, err := quality.FitRank(&needles, &text)
	if err != nil {
		return nil, fmt.Errorf("-fit-rank: %w", err)
	}
	fmt.Printf("Fitted ranker (%d needles and %d windows of non-test Go, seed %d; zoom BCE against the teacher's mass per span; weights on %s):\n", h.fit, h.fit, h.seed, strings.Join(quality.RankFeatures[:], ", "))
	for gi, w := range fit.W {
		if w == nil {
			continue
		}
		fmt.Printf("  layer %d, KV head %d: %d samples, BCE %.4f (constant %.4f, the targets' entropy %.4f), weights %.3f\n", gi/lc.Model.KVHeads, gi%lc.Model.KVHeads, fit.Samples[gi], fit.Loss[gi], fit.Base[gi], fit.Floor[gi], w)
	}
	fmt.Println()
	return fit, nil
}
