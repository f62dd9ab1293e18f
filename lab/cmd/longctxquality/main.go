// Command longctxquality measures, on gocode-2k (a 2,048-token byte-level
// Go model), how well span memory and KV eviction policies keep long
// context at the same GPU budget (lab/quality), and prints the tables of
// docs/quality.md's "Long context (gocode-2k)":
//
//	go run ./lab/cmd/longctxquality
//
// Three measurements on held-out Go (the _test.go files of the go
// command's GOROOT/src): -needles single needles, -multi needles of -keys
// definitions with one recalled, and -files natural windows (KL over the
// last -tail bytes). A count of 0 skips its table.
//
// -bound adds span memory routed by per-span key bounds (docs/quality.md,
// "Key bounds"); -boundwhy prints instead, on -needles single needles,
// the teacher's attention mass each routing signal's zoom captures.
//
// -heads adds span memory on the retrieval heads only, a recent window on
// the others (docs/quality.md, "Retrieval heads"), the heads measured first
// on training needles, and span+heads+router, its zoom ranked by SeKV's
// untrained routers; with -routers also span+heads+trained (the trained
// ones), with -oracle span+heads+oracle (the teacher's attention mass),
// with -fit-rank N span+heads+fit (a ranker fitted first to the teacher's
// mass on N needles and N windows of non-test Go); those rank below
// -zoom-gate only, when set.
//
// -gpuzoom prints instead docs/quality.md's "GPU zoom path" table: on
// -needles single needles, span memory's zoom rebuilt through gpu.Prefetcher
// and the reconstruct kernel (the CUDA device with KVSTORE_GPU=1, else the
// CPU device) against the host path, with the zoom's bytes per step and the
// prefetcher's hit rate (-arena, -lookahead).
package main

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/lab/quality"
	"github.com/kvstore/kvstore/store"
)

func main() {
	needles := flag.Int("needles", 200, "single needles (0: none)")
	multi := flag.Int("multi", 200, "multi-needles (0: none)")
	keys := flag.Int("keys", 4, "definitions per multi-needle, one recalled")
	files := flag.Int("files", 50, "natural windows for KL (0: none)")
	window := flag.Int("window", 2048, "window tokens (gocode-2k's seq_len: 2048)")
	tail := flag.Int("tail", 512, "natural windows: scored last tokens")
	budgets := flag.String("budgets", "0.05,0.10,0.25", "GPU budgets, fractions of the context KV")
	seed := flag.Uint64("seed", 1, "seed of the needles and of the files' order")
	gpuZoom := flag.Bool("gpuzoom", false, "instead of the tables: span memory's zoom through the GPU path against the host path, on -needles single needles (CUDA device with KVSTORE_GPU=1, else the CPU device)")
	arena := flag.Float64("arena", 0.5, "-gpuzoom: device budget for factor blocks, a share of the context's factor bytes")
	lookahead := flag.Int("lookahead", 0, "-gpuzoom: spans per KV head prefetched beyond the zoomed ones")
	var ro routerFlags
	ro.define()
	heads.define()
	only := flag.String("methods", "", "comma-separated: measure only these methods (and full KV)")
	anchorShare := flag.Float64("anchor-share", quality.DefaultAnchorShare, "span memory: the most of the budget its resident anchors take")
	anchorAlpha := flag.Float64("anchor-alpha", 0, "span memory: tokens above mean + this many standard deviations of surprisal are anchors (0: segment's default)")
	sizeRule := flag.Bool("sizerule", false, "build span memory with the store's size rule: spans factored only where that makes the memory smaller, memories larger than their rows refused and left out")
	resTail := flag.Float64("resident-tail", 0, "span memory: keep the spans holding this share of the context's last tokens unfactored, so that span+heads' streaming windows read them exact (span+heads: its stream share times the largest budget)")
	rawSpans := flag.Bool("raw-spans", false, "-sizerule: keep the spans left unfactored as the segmentation cut them, not one span per run of them, so that a zoom moves their rows span by span")
	routeRaw := flag.Bool("route-raw", false, "-sizerule: SeKV's routers (span, span+trained, span+heads+router and +trained) score the spans left unfactored too, by their summary keys, so that their zoom moves those spans' rows")
	energy := flag.Float64("energy", 0, "span memory: the factors' SVD energy threshold (0: 0.99)")
	rowDType := flag.String("dtype", "f32", "span memory: the model spec's dtype, its resident rows' (f32 or bf16)")
	flag.Parse()
	zoom = gpuZoomFlags{*gpuZoom, *arena, *lookahead}
	dt, err := format.ParseDType(*rowDType)
	if err != nil {
		fmt.Fprintln(os.Stderr, "longctxquality: -dtype:", err)
		os.Exit(2)
	}
	span := quality.Config{SizeRule: *sizeRule, RawSpans: *rawSpans, RouteRaw: *routeRaw, ResidentTail: *resTail, AnchorShare: *anchorShare, Energy: *energy, RowDType: dt}
	span.Segment.AnchorAlpha = *anchorAlpha
	var methods []string
	if *only != "" {
		methods = strings.Split(*only, ",")
	}
	if err := run(*needles, *multi, *keys, *files, *window, *tail, *budgets, *seed, &ro, span, methods); err != nil {
		fmt.Fprintln(os.Stderr, "longctxquality:", err)
		os.Exit(1)
	}
}

func run(needles, multi, keys, files, window, tail int, budgetList string, seed uint64, ro *routerFlags, span quality.Config, only []string) error {
	budgets, err := quality.ParseFloats(budgetList)
	if err != nil {
		return err
	}
	m, p, err := quality.LoadGoCode2k()
	if err != nil {
		return err
	}
	all, root, err := quality.HeldOutGoSrc(window)
	if err != nil {
		return err
	}
	if heads.train {
		if all, _, err = quality.TrainingGoSrc(window); err != nil {
			return err
		}
	}
	if len(all) == 0 {
		return fmt.Errorf("no held-out file of %d bytes under %s", window, root)
	}
	rand.New(rand.NewPCG(seed, 0x66696c65)).Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
	var sizes []store.SpanSize // of the current table's contexts
	lc := quality.LongConfig{Model: m, Budgets: budgets, Oracle: ro.oracle, Bound: ro.bound, BoundChannels: ro.channels, Span: span, Only: only,
		SpanSize: func(s store.SpanSize) { sizes = append(sizes, s) }}
	if lc.Routers, err = ro.load(m, p); err != nil {
		return err
	}
	lc.StreamShare, lc.RetrievalCap, lc.ZoomTau, lc.ZoomRel, lc.ZoomGate, lc.StreamTop = heads.stream, heads.cap, heads.tau, heads.rel, heads.gate, heads.top
	lc.RankWithin = heads.within
	if lc.ZoomTauHead, err = heads.headTau(m.Layers, m.KVHeads); err != nil {
		return err
	}
	if lc.Retrieval, err = heads.retrieval(lc, window); err != nil {
		return err
	}
	lc.Span.HeadRank = quality.StreamRank(lc.Retrieval, heads.rank)
	if lc.RankFit, err = heads.rankFit(lc, window, tail); err != nil {
		return err
	}
	if ro.why {
		return runWhy(quality.NeedleConfig{LongConfig: lc, Files: all, Window: window, Needles: needles, Keys: 1, Seed: seed})
	}
	if zoom.on {
		return runGPUZoom(quality.NeedleConfig{LongConfig: lc, Files: all, Window: window, Needles: needles, Seed: seed}, zoom.arena, zoom.lookahead)
	}
	kind := "held-out _test.go"
	if heads.train {
		kind = "training (non-test) .go"
	}
	fmt.Printf("gocode-2k, windows of %d tokens, %s files of %s (%d of >= %d bytes, seed %d)\n\n", window, kind, root, len(all), window, seed)
	if ro.bound {
		fmt.Printf("span+bound-ch: bounds on %d channels per layer and KV head\n\n", ro.channels)
	}
	start := time.Now()
	progress := func(what string, n int) func(int, *quality.Needle, error) {
		return func(i int, nd *quality.Needle, err error) {
			fmt.Fprintf(os.Stderr, "%s %d/%d (depth %.2f) %v %v\n", what, i+1, n, nd.Depth, time.Since(start).Round(time.Second), errText(err))
		}
	}
	for _, c := range []struct {
		title string
		n, k  int
	}{{"Single needle", needles, 1}, {fmt.Sprintf("Multi-needle (%d definitions, one recalled)", keys), multi, keys}} {
		if c.n == 0 {
			continue
		}
		sizes = sizes[:0]
		rows, skipped, err := quality.RunNeedles(quality.NeedleConfig{LongConfig: lc, Files: all, Window: window, Needles: c.n, Keys: c.k,
			Seed: seed, Progress: progress(c.title, c.n)})
		if err != nil {
			return err
		}
		fmt.Printf("%s: %d needles (%d left out: span memory not built), the recalled definition at depths spread over [0, 0.9) of the window\n\n", c.title, c.n-skipped, skipped)
		fmt.Println("| budget | method | log-prob/byte | top-1/byte | exact | top-1 at depth 0-.3 / .3-.6 / .6-.9 | rows (max) |")
		fmt.Println("|---|---|---|---|---|---|---|")
		for _, r := range rows {
			fmt.Printf("| %s | %s | %.2f | %.2f | %d/%d | %.2f / %.2f / %.2f | %s |\n", budget(r.Budget), r.Method, r.LogProb, r.Top1, r.Exact, r.Needles,
				r.DepthTop1[0], r.DepthTop1[1], r.DepthTop1[2], rowsCell(r.Rows, r.OverBudget))
		}
		fmt.Println()
		fmt.Println(sizeLine(sizes))
		if ro.spread {
			printSpread(rows)
		}
		if err := ro.writeScores(c.title, rows); err != nil {
			return err
		}
	}
	if files > 0 {
		fs := all[len(all)-min(files, len(all)):] // the shuffled list's other end from the needles' filler
		sizes = sizes[:0]
		rows, skipped, err := quality.RunLongText(quality.LongTextConfig{LongConfig: lc, Files: fs, Window: window, Tail: tail,
			Progress: func(i int, f string, err error) {
				fmt.Fprintf(os.Stderr, "text %d/%d %s %v %v\n", i+1, len(fs), f, time.Since(start).Round(time.Second), errText(err))
			}})
		if err != nil {
			return err
		}
		fmt.Printf("Natural text: %d files (%d left out: span memory not built), the memory of the first %d tokens, KL(full || method) and top-1 agreement over the last %d\n\n", len(fs)-skipped, skipped, window-tail, tail)
		fmt.Println("| budget | method | KL median | KL worst | top-1 median | top-1 worst | rows (max) |")
		fmt.Println("|---|---|---|---|---|---|---|")
		for _, r := range rows {
			fmt.Printf("| %s | %s | %.3f | %.3f | %.3f | %.3f | %s |\n", budget(r.Budget), r.Method, r.MedianKL(), r.WorstKL(), r.MedianTop1(), r.WorstTop1(), rowsCell(r.Rows, r.OverBudget))
		}
		fmt.Println()
		fmt.Println(sizeLine(sizes))
	}
	fmt.Fprintf(os.Stderr, "done in %v\n", time.Since(start).Round(time.Second))
	return nil
}

// zoom is the -gpuzoom flags.
var (
	zoom  gpuZoomFlags
	heads headFlags
)

type gpuZoomFlags struct {
	on        bool
	arena     float64
	lookahead int
}

// sizeLine says how large the stored span memories were against the raw
// bf16 KV of their contexts: stored bytes (store.SpanSize: resident rows,
// factors, summaries, records) over Tokens x Layers x KVHeads x HeadDim x
// 2 x 2, the median and the largest ratio, and the sums.
func sizeLine(sizes []store.SpanSize) string {
	if len(sizes) == 0 {
		return "Span memory size: no memory built\n"
	}
	ratios := make([]float64, len(sizes))
	var stored, raw int64
	for i, s := range sizes {
		ratios[i] = float64(s.Stored()) / float64(s.RawBF16)
		stored, raw = stored+s.Stored(), raw+s.RawBF16
	}
	slices.Sort(ratios)
	med := ratios[len(ratios)/2]
	if len(ratios)%2 == 0 {
		med = (ratios[len(ratios)/2-1] + med) / 2
	}
	return fmt.Sprintf("Span memory size: stored bytes / raw bf16 KV bytes %.3f median, %.3f largest over %d contexts (%d / %d bytes in all)\n",
		med, ratios[len(ratios)-1], len(sizes), stored, raw)
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return "left out: " + err.Error()
}

func budget(f float64) string {
	if f == 1 {
		return "100%"
	}
	return fmt.Sprintf("%g%%", 100*f)
}

func rowsCell(rows float64, over bool) string {
	if over {
		return fmt.Sprintf("%.1f%% (over)", 100*rows)
	}
	return fmt.Sprintf("%.1f%%", 100*rows)
}
