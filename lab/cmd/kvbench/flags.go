package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/lab/bench"
)

const summary = `Puts, Gets (warm and cold) and Assembles synthetic bf16 KV packets in
kvstore and its peers, on the same bytes, the stores interleaved run by run,
and prints MB/s (median of --runs), the ratio to plain files, write
amplification and on-disk size. With --ttft it adds the time-to-first-token
model. Stores live in a temporary directory under --dir (default: the system
temp dir when it is on the working directory's disk and not tmpfs, else the
working directory), removed afterwards.`

// options are kvbench's flags, parsed.
type options struct {
	shapes, tokens, stores, dir, save string
	runs, assemble, assembleMiB       int
	seed                              uint64
	json, ttft                        bool
}

// parseOptions parses args; a bad flag or argument is a usage error.
func parseOptions(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("kvbench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.shapes, "shape", "all", "model shapes: llama8b, qwen3b or all (comma-separated)")
	fs.StringVar(&o.tokens, "tokens", "256,1000,4000", "tokens per packet (comma-separated)")
	fs.StringVar(&o.stores, "stores", strings.Join(bench.DefaultStores, ","), "stores to measure ("+strings.Join(bench.StoreNames(), ", ")+"), or all")
	fs.IntVar(&o.runs, "runs", 5, "timed runs per figure (the median is reported)")
	fs.IntVar(&o.assemble, "assemble", 10, "packets per Assemble (0: no Assemble)")
	fs.IntVar(&o.assembleMiB, "assemble-max-mib", 2048, "skip Assemble where its packets exceed this many MiB (0: no limit)")
	fs.Uint64Var(&o.seed, "seed", 1, "seed of the synthetic packets")
	fs.StringVar(&o.dir, "dir", "", "scratch location (a temporary directory is made inside it)")
	fs.BoolVar(&o.json, "json", false, "print the report as JSON")
	fs.StringVar(&o.save, "save", "", "also write the JSON report to this file")
	fs.BoolVar(&o.ttft, "ttft", false, "add the TTFT model (H200) at the measured bandwidths")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: kvbench [flags]\n\n%s\n\nflags:\n", summary)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return o, err
		}
		return o, fmt.Errorf("%w: %v", errUsage, err)
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("%w: unexpected arguments %q", errUsage, fs.Args())
	}
	return o, nil
}

// config turns the options into a bench.Config (without Dir).
func (o *options) config() (bench.Config, error) {
	shapes, err := bench.ParseShapes(o.shapes)
	if err != nil {
		return bench.Config{}, usageIf(err)
	}
	stores, err := bench.ParseStores(o.stores)
	if err != nil {
		return bench.Config{}, usageIf(err)
	}
	tokens, err := parseInts(o.tokens)
	if err != nil {
		return bench.Config{}, err
	}
	cfg := bench.Config{
		Shapes: shapes, Tokens: tokens, Runs: o.runs, Stores: stores,
		AssembleN: o.assemble, AssembleMaxBytes: int64(o.assembleMiB) << 20, Seed: o.seed,
		Dir: ".", // checked for real once the scratch directory exists
	}
	return cfg, usageIf(cfg.Validate())
}

// usageIf turns an invalid-argument error into a usage error (exit 2).
func usageIf(err error) error {
	if errors.Is(err, format.ErrInvalidArgument) {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	return err
}

func parseInts(s string) ([]int, error) {
	var out []int
	for _, part := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(part))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%w: --tokens: %q is not a positive integer", errUsage, part)
		}
		out = append(out, n)
	}
	return out, nil
}
