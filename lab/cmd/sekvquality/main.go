// Command sekvquality measures SeKV span memory's quality (lab/quality)
// and prints the tables of docs/quality.md:
//
//	go run ./lab/cmd/sekvquality
//
// It runs gocode-hd64 on held-out Go test files (-text, a standard-library
// package; empty: text sampled from the model), stories260K (when
// testenv.ModelPath finds them) and the random head-dim-128 model; -model
// picks a comma-separated subset, -context and -continuation resize.
package main

import (
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kvstore/kvstore/lab/llama"
	"github.com/kvstore/kvstore/lab/quality"
	"github.com/kvstore/kvstore/segment"
)

// docBytes is -doc-bytes.
var docBytes int

func main() {
	model := flag.String("model", "all", "comma-separated gocode, stories, random, or all")
	stCtx := flag.Int("context", 448, "context tokens of gocode-hd64 and stories260K (seq_len 512 each)")
	goPkg := flag.String("text", "strings", "standard-library package whose _test.go files are gocode's text (empty: sampled)")
	flag.IntVar(&docBytes, "doc-bytes", 0, "cut each of gocode's files to its first N bytes, so that a context holds several (0: whole)")
	rndCtx := flag.Int("random-context", 1024, "context tokens of the random model")
	cont := flag.Int("continuation", 64, "held-out continuation tokens")
	budgets := flag.String("budgets", "0.05,0.10,0.25", "GPU budgets, fractions of the context KV")
	seed := flag.Uint64("seed", 1, "sampling seed")
	flag.Parse()
	if err := run(*model, *goPkg, *stCtx, *rndCtx, *cont, *budgets, *seed); err != nil {
		fmt.Fprintln(os.Stderr, "sekvquality:", err)
		os.Exit(1)
	}
}

func run(models, goPkg string, stCtx, rndCtx, cont int, budgetList string, seed uint64) error {
	want := func(name string) bool { return models == "all" || slices.Contains(strings.Split(models, ","), name) }
	var budgets []float64
	for _, f := range strings.Split(budgetList, ",") {
		b, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil {
			return err
		}
		budgets = append(budgets, b)
	}
	ranks := []int{1, 2, 4, 8, 16, 32}
	var cfgs []quality.Config
	if want("gocode") {
		m, name, text, err := quality.LoadGoCode(goPkg, stCtx+cont, docBytes)
		if err != nil {
			return err
		}
		cfgs = append(cfgs, quality.Config{Name: name, Model: m, Context: stCtx, Continuation: cont,
			BOS: quality.GoBOS, Text: text, Budgets: budgets, Ranks: ranks, Seed: seed})
	}
	if want("stories") {
		m, err := quality.LoadStories(models != "all")
		if err != nil {
			return err
		}
		if m != nil {
			cfgs = append(cfgs, quality.Config{Name: "stories260K (real weights)", Model: m, Context: stCtx, Continuation: cont,
				BOS: 1, Budgets: budgets, Ranks: ranks, Seed: seed})
		}
	}
	if want("random") {
		m, err := llama.Random(quality.RandomHD128, 7)
		if err != nil {
			return err
		}
		// Spans of at least 64 tokens: rank-32 factors of 128-dim rows
		// only save room on spans longer than about 40 tokens.
		cfgs = append(cfgs, quality.Config{Name: "random weights, head dim 128", Model: m, Context: rndCtx, Continuation: cont,
			Budgets: budgets, Ranks: ranks, Seed: seed, Segment: segment.Options{MinSpan: 64}})
	}
	for _, c := range cfgs {
		start := time.Now()
		rep, err := quality.Run(c)
		if err != nil {
			return fmt.Errorf("%s: %w", c.Name, err)
		}
		if err := rep.Markdown(os.Stdout); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "%s: %v\n", c.Name, time.Since(start).Round(time.Millisecond))
	}
	return nil
}
