// Command packetquality measures compressed and pruned packets
// (internal/quality.RunPackets) and prints the tables of docs/quality.md:
//
//	go run ./internal/quality/cmd/packetquality
//
// It runs stories260K (when llama.TestModelPath finds it) and the random
// head-dim-128 model; -model picks one.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/kvstore/kvstore/format/codec"
	"github.com/kvstore/kvstore/internal/llama"
	"github.com/kvstore/kvstore/internal/quality"
)

func main() {
	model := flag.String("model", "all", "stories, random or all")
	stCtx := flag.Int("context", 448, "context tokens of stories260K (its seq_len is 512)")
	rndCtx := flag.Int("random-context", 512, "context tokens of the random model")
	cont := flag.Int("continuation", 64, "held-out continuation tokens")
	group := flag.Int("group", 0, "int8/int4 group size (0: codec default, 32)")
	seed := flag.Uint64("seed", 1, "sampling seed")
	queries := flag.Int("tova-queries", 32, "last context queries whose attention TOVA sums (1: TOVA proper)")
	flag.Parse()
	if err := run(*model, *stCtx, *rndCtx, *cont, *group, *queries, *seed); err != nil {
		fmt.Fprintln(os.Stderr, "packetquality:", err)
		os.Exit(1)
	}
}

func run(which string, stCtx, rndCtx, cont, group, queries int, seed uint64) error {
	opts := codec.Options{GroupSize: group}
	var cfgs []quality.PacketConfig
	if which == "all" || which == "stories" {
		p, ok := llama.TestModelPath()
		if ok {
			m, err := llama.Load(p)
			if err != nil {
				return err
			}
			cfgs = append(cfgs, quality.PacketConfig{Name: "stories260K (real weights)", Model: m, Context: stCtx,
				Continuation: cont, BOS: 1, Seed: seed, Options: opts, TOVAQueries: queries})
		} else if which == "stories" {
			return fmt.Errorf("stories260K not found at %q (set KVSTORE_TESTMODEL)", p)
		}
	}
	if which == "all" || which == "random" {
		m, err := llama.Random(quality.RandomHD128, seed)
		if err != nil {
			return err
		}
		cfgs = append(cfgs, quality.PacketConfig{Name: "random, head dim 128, llama3 RoPE", Model: m, Context: rndCtx,
			Continuation: cont, BOS: 0, Seed: seed, Options: opts, TOVAQueries: queries})
	}
	for _, c := range cfgs {
		r, err := quality.RunPackets(c)
		if err != nil {
			return fmt.Errorf("%s: %w", c.Name, err)
		}
		if err := r.Markdown(os.Stdout); err != nil {
			return err
		}
	}
	return nil
}
