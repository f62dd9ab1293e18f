// Command packetquality measures compressed and pruned packets
// (lab/quality.RunPackets) and prints the tables of docs/quality.md:
//
//	go run ./lab/cmd/packetquality
//
// It runs gocode-hd64 on held-out Go test files (-text, a standard-library
// package; empty: text sampled from the model), stories260K (when
// testenv.ModelPath finds them) and the random head-dim-128 model; -model
// picks a comma-separated subset. Besides raw, shuffle-zstd, int8 and int4
// it measures low-rank settings (-lowrank; by default ranks 8, 16 and 32 of
// gocode's 64 dims, 4 and 6 of stories260K's 8, 16, 32 and 64 of the random
// model's 128, and energy 0.999 on each).
//
// -points N measures operating points instead: each (codec, policy, kept
// fraction) over N held-out _test.go files of GOROOT (quality.RunPoints,
// quality.HeldOutSplit: a tuning set of -points-tune files, then the N
// evaluation files), reporting each point's median and worst KL and
// bytes; -model gocode or gocode2k.
package main

import (
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kvstore/kvstore/codec"
	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/lab/llama"
	"github.com/kvstore/kvstore/lab/quality"
)

// docBytes is -doc-bytes.
var docBytes int

func main() {
	model := flag.String("model", "all", "comma-separated gocode, stories, random, or all")
	stCtx := flag.Int("context", 448, "context tokens of gocode-hd64 and stories260K (seq_len 512 each)")
	goPkg := flag.String("text", "strings", "standard-library package whose _test.go files are gocode's text (empty: sampled)")
	flag.IntVar(&docBytes, "doc-bytes", 0, "cut each of gocode's files to its first N bytes, so that a context holds several (0: whole)")
	rndCtx := flag.Int("random-context", 512, "context tokens of the random model")
	cont := flag.Int("continuation", 64, "held-out continuation tokens")
	group := flag.Int("group", 0, "int8/int4 group size (0: codec default, 32)")
	seed := flag.Uint64("seed", 1, "sampling seed")
	queries := flag.Int("tova-queries", 32, "last context queries whose attention TOVA sums (1: TOVA proper)")
	lowRank := flag.String("lowrank", "", "low-rank settings, comma-separated rN (fixed rank N) or eX (energy X); "+
		"empty: r8,r16,r32,e0.999 on gocode, r4,r6,e0.999 on stories260K and r16,r32,r64,e0.999 on the random model; \"none\": none")
	cold := flag.String("cold", "", "instead of the tables, time cold loads of gocode's packet under codec/policy/keep "+
		"(e.g. int4/tova/0.25) against raw; see quality.ColdLoad")
	copies := flag.Int("cold-copies", 128, "packets per side of -cold")
	rounds := flag.Int("cold-rounds", 5, "rounds of -cold")
	var pf pointsFlags
	flag.IntVar(&pf.eval, "points", 0, "instead of the tables, the operating points over N held-out files (median and worst; see -points-*)")
	flag.IntVar(&pf.tune, "points-tune", 8, "files of the tuning set, disjoint from the -points evaluation files")
	flag.StringVar(&pf.set, "points-set", "eval", "which files -points measures: eval or tune")
	flag.Uint64Var(&pf.seed, "points-seed", 1, "seed of -points' shuffle of the held-out files")
	flag.StringVar(&pf.codecs, "points-codecs", "raw,int8,int4", "codecs of -points")
	flag.StringVar(&pf.policies, "points-policies", "tova,anchors+tova", "fixed-fraction policies of -points")
	flag.StringVar(&pf.keeps, "points-keeps", "0.25,0.5,0.75", "kept fractions of -points")
	flag.StringVar(&pf.mass, "points-mass", "0.9,0.95,0.98", "mass shares of the tova-mass policy in -points")
	flag.Float64Var(&pf.massMin, "points-mass-min", 0.25, "the least fraction tova-mass keeps")
	flag.Float64Var(&pf.bound, "points-bound", 0.01, "the KL bound -points marks worst texts against")
	flag.IntVar(&pf.observe, "points-observe", 32, "prefill the last N context tokens apart, with attention (0: all with attention)")
	flag.StringVar(&pf.check, "points-check", "", "probe KL bounds of the window-check policy in -points (comma-separated; empty: none)")
	flag.IntVar(&pf.checkProbe, "points-check-probe", 64, "the context's last tokens window-check decodes to check a fraction")
	flag.Float64Var(&pf.hybridRecent, "points-hybrid-recent", 0.5, "the share of window+tova's budget kept as the most recent rows")
	flag.StringVar(&pf.json, "points-json", "", "also write -points' report, every text's figures, to this JSON file")
	flag.Parse()
	if pf.eval > 0 {
		pf.model, pf.context, pf.cont, pf.queries = *model, *stCtx, *cont, *queries
		if err := runPoints(pf); err != nil {
			fmt.Fprintln(os.Stderr, "packetquality:", err)
			os.Exit(1)
		}
		return
	}
	if *cold != "" {
		if err := runCold(*cold, *goPkg, *stCtx, *copies, *rounds, *queries, *group, *seed); err != nil {
			fmt.Fprintln(os.Stderr, "packetquality:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(*model, *goPkg, *stCtx, *rndCtx, *cont, *group, *queries, *seed, *lowRank); err != nil {
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

func run(models, goPkg string, stCtx, rndCtx, cont, group, queries int, seed uint64, lowRank string) error {
	want := func(name string) bool { return models == "all" || slices.Contains(strings.Split(models, ","), name) }
	opts := codec.Options{GroupSize: group}
	goLR, err := parseLowRank(lowRank, "r8,r16,r32,e0.999")
	if err != nil {
		return err
	}
	stLR, err := parseLowRank(lowRank, "r4,r6,e0.999")
	if err != nil {
		return err
	}
	rndLR, err := parseLowRank(lowRank, "r16,r32,r64,e0.999")
	if err != nil {
		return err
	}
	var cfgs []quality.PacketConfig
	if want("gocode") {
		m, name, text, err := quality.LoadGoCode(goPkg, stCtx+cont, docBytes)
		if err != nil {
			return err
		}
		cfgs = append(cfgs, quality.PacketConfig{Name: name, Model: m, Context: stCtx, Continuation: cont,
			BOS: quality.GoBOS, Text: text, Seed: seed, Options: opts, LowRank: goLR, TOVAQueries: queries})
	}
	if want("stories") {
		m, err := quality.LoadStories(models != "all")
		if err != nil {
			return err
		}
		if m != nil {
			cfgs = append(cfgs, quality.PacketConfig{Name: "stories260K (real weights)", Model: m, Context: stCtx,
				Continuation: cont, BOS: 1, Seed: seed, Options: opts, LowRank: stLR, TOVAQueries: queries})
		}
	}
	if want("random") {
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

// runCold is -cold: quality.ColdLoad on gocode-hd64.
func runCold(setting, goPkg string, n, copies, rounds, queries, group int, seed uint64) error {
	parts := strings.Split(setting, "/")
	if len(parts) != 3 {
		return fmt.Errorf("-cold %q: want codec/policy/keep", setting)
	}
	var c format.Codec
	for _, x := range []format.Codec{format.CodecRaw, format.CodecShuffleZstd, format.CodecInt8, format.CodecInt4} {
		if x.String() == parts[0] {
			c = x
		}
	}
	if c == 0 && parts[0] != format.CodecRaw.String() {
		return fmt.Errorf("-cold %q: unknown codec %q", setting, parts[0])
	}
	keep, err := strconv.ParseFloat(parts[2], 64)
	if err != nil {
		return fmt.Errorf("-cold %q: %w", setting, err)
	}
	m, name, text, err := quality.LoadGoCode(goPkg, n, docBytes)
	if err != nil {
		return err
	}
	r, err := quality.ColdLoad(quality.ColdConfig{
		Packet: quality.PacketConfig{Name: name, Model: m, Context: n, Continuation: 1, BOS: quality.GoBOS, Text: text,
			Seed: seed, Codecs: []format.Codec{c}, Options: codec.Options{GroupSize: group}, TOVAQueries: queries},
		Policy: parts[1], Keep: keep, Copies: copies, Rounds: rounds, Dir: os.Getenv("KVSTORE_BENCH_DIR")})
	if err != nil {
		return err
	}
	fmt.Printf("%s: %d copies of %d tokens, raw %d B, %s %d B (%.1f%%)\n", name, copies, n, r.RawBytes, setting,
		r.StoredBytes, 100*float64(r.StoredBytes)/float64(r.RawBytes))
	for i := range r.Raw {
		fmt.Printf("round %d: raw %v (%.2f GB/s), %s %v: %.2fx\n", i, r.Raw[i].Round(time.Microsecond),
			float64(r.RawBytes)/r.Raw[i].Seconds()/1e9, setting, r.Setting[i].Round(time.Microsecond),
			r.Raw[i].Seconds()/r.Setting[i].Seconds())
	}
	fmt.Printf("median raw/setting: %.2fx\n", r.Ratio())
	return nil
}
