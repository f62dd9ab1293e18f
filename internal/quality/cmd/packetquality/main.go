// Command packetquality measures compressed and pruned packets
// (internal/quality.RunPackets) and prints the tables of docs/quality.md:
//
//	go run ./internal/quality/cmd/packetquality
//
// It runs stories260K (when testenv.ModelPath finds it) and the random
// head-dim-128 model; -model picks one. Besides raw, shuffle-zstd, int8
// and int4 it measures low-rank settings (-lowrank; by default ranks 4 and
// 6 of stories260K's 8 dims, 16, 32 and 64 of the random model's 128, and
// energy 0.999 on both).
package main

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/kvstore/kvstore/codec"
	"github.com/kvstore/kvstore/internal/llama"
	"github.com/kvstore/kvstore/internal/quality"
	"github.com/kvstore/kvstore/internal/testenv"
)

func main() {
	model := flag.String("model", "all", "stories, random or all")
	stCtx := flag.Int("context", 448, "context tokens of stories260K (its seq_len is 512)")
	rndCtx := flag.Int("random-context", 512, "context tokens of the random model")
	cont := flag.Int("continuation", 64, "held-out continuation tokens")
	group := flag.Int("group", 0, "int8/int4 group size (0: codec default, 32)")
	seed := flag.Uint64("seed", 1, "sampling seed")
	queries := flag.Int("tova-queries", 32, "last context queries whose attention TOVA sums (1: TOVA proper)")
	lowRank := flag.String("lowrank", "", "low-rank settings, comma-separated rN (fixed rank N) or eX (energy X); "+
		"empty: r4,r6,e0.999 on stories260K and r16,r32,r64,e0.999 on the random model; \"none\": none")
	flag.Parse()
	if err := run(*model, *stCtx, *rndCtx, *cont, *group, *queries, *seed, *lowRank); err != nil {
		fmt.Fprintln(os.Stderr, "packetquality:", err)
		os.Exit(1)
	}
}

// parseLowRank turns the -lowrank flag into settings; def when it is empty.
func parseLowRank(flagv, def string) ([]codec.Options, error) {
	switch flagv {
	case "":
		flagv = def
	case "none":
		return nil, nil
	}
	var out []codec.Options
	for _, f := range strings.Split(flagv, ",") {
		f = strings.TrimSpace(f)
		if len(f) < 2 {
			return nil, fmt.Errorf("low-rank setting %q: want rN or eX", f)
		}
		switch f[0] {
		case 'r':
			n, err := strconv.Atoi(f[1:])
			if err != nil {
				return nil, fmt.Errorf("low-rank setting %q: %w", f, err)
			}
			out = append(out, codec.Options{Rank: n})
		case 'e':
			x, err := strconv.ParseFloat(f[1:], 64)
			if err != nil {
				return nil, fmt.Errorf("low-rank setting %q: %w", f, err)
			}
			out = append(out, codec.Options{Energy: x})
		default:
			return nil, fmt.Errorf("low-rank setting %q: want rN or eX", f)
		}
	}
	return out, nil
}

func run(which string, stCtx, rndCtx, cont, group, queries int, seed uint64, lowRank string) error {
	opts := codec.Options{GroupSize: group}
	stLR, err := parseLowRank(lowRank, "r4,r6,e0.999")
	if err != nil {
		return err
	}
	rndLR, err := parseLowRank(lowRank, "r16,r32,r64,e0.999")
	if err != nil {
		return err
	}
	var cfgs []quality.PacketConfig
	if which == "all" || which == "stories" {
		p, ok := testenv.ModelPath("stories260K.bin")
		if ok {
			m, err := llama.Load(p)
			if err != nil {
				return err
			}
			cfgs = append(cfgs, quality.PacketConfig{Name: "stories260K (real weights)", Model: m, Context: stCtx,
				Continuation: cont, BOS: 1, Seed: seed, Options: opts, LowRank: stLR, TOVAQueries: queries})
		} else if which == "stories" {
			return fmt.Errorf("stories260K not found at %q (set KVSTORE_TESTDATA or KVSTORE_TESTMODEL)", p)
		}
	}
	if which == "all" || which == "random" {
		m, err := llama.Random(quality.RandomHD128, seed)
		if err != nil {
			return err
		}
		cfgs = append(cfgs, quality.PacketConfig{Name: "random, head dim 128, llama3 RoPE", Model: m, Context: rndCtx,
			Continuation: cont, BOS: 0, Seed: seed, Options: opts, LowRank: rndLR, TOVAQueries: queries})
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
