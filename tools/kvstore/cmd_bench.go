package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/internal/bench"
)

func init() {
	register(&command{
		name:    "bench",
		summary: "measure kvstore against plain files, Pebble, Badger and bbolt",
		run:     runBench,
	})
}

const benchSummary = `Puts, Gets (warm and cold) and Assembles synthetic bf16 KV packets in
kvstore and its peers, on the same bytes, the stores interleaved run by run,
and prints
MB/s (median of --runs), the ratio to plain files, write amplification and
on-disk size. With --ttft it adds the time-to-first-token model. Stores live
in a temporary directory under --dir (default: the system temp dir when it is
on the working directory's disk and not tmpfs, else the working directory),
removed afterwards.`

// benchFlags are bench's flags, parsed.
type benchFlags struct {
	shapes, tokens, stores, dir, save string
	runs, assemble, assembleMiB       int
	seed                              uint64
	json, ttft                        bool
}

func runBench(e *env, args []string) error {
	fs := newFlags(e, "bench", "[flags]", benchSummary)
	f := benchFlags{dir: e.dir, json: e.json}
	fs.StringVar(&f.shapes, "shape", "all", "model shapes: llama8b, qwen3b or all (comma-separated)")
	fs.StringVar(&f.tokens, "tokens", "256,1000,4000", "tokens per packet (comma-separated)")
	fs.StringVar(&f.stores, "stores", strings.Join(bench.DefaultStores, ","), "stores to measure ("+strings.Join(bench.StoreNames(), ", ")+"), or all")
	fs.IntVar(&f.runs, "runs", 5, "timed runs per figure (the median is reported)")
	fs.IntVar(&f.assemble, "assemble", 10, "packets per Assemble (0: no Assemble)")
	fs.IntVar(&f.assembleMiB, "assemble-max-mib", 2048, "skip Assemble where its packets exceed this many MiB (0: no limit)")
	fs.Uint64Var(&f.seed, "seed", 1, "seed of the synthetic packets")
	fs.StringVar(&f.dir, "dir", f.dir, "scratch location (a temporary directory is made inside it)")
	fs.BoolVar(&f.json, "json", f.json, "print the report as JSON")
	fs.StringVar(&f.save, "save", "", "also write the JSON report to this file")
	fs.BoolVar(&f.ttft, "ttft", false, "add the TTFT model (H200) at the measured bandwidths")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected arguments %q", errUsage, fs.Args())
	}
	cfg, err := f.config()
	if err != nil {
		return err
	}
	scratch, err := benchScratch(e, f.dir)
	if err != nil {
		return err
	}
	defer os.RemoveAll(scratch)
	cfg.Dir = scratch
	prog := newProgress(e, "bench") // quiet unless stderr is a terminal
	cfg.Progress = prog.stage
	defer prog.done()
	rep, runErr := bench.Run(cfg)
	if rep == nil {
		return usageIf(runErr)
	}
	if err := writeBench(e.stdout, rep, f); err != nil {
		return err
	}
	return runErr
}

// config turns the flags into a bench.Config (without Dir).
func (f *benchFlags) config() (bench.Config, error) {
	shapes, err := bench.ParseShapes(f.shapes)
	if err != nil {
		return bench.Config{}, usageIf(err)
	}
	stores, err := bench.ParseStores(f.stores)
	if err != nil {
		return bench.Config{}, usageIf(err)
	}
	tokens, err := parseInts(f.tokens)
	if err != nil {
		return bench.Config{}, err
	}
	cfg := bench.Config{
		Shapes: shapes, Tokens: tokens, Runs: f.runs, Stores: stores,
		AssembleN: f.assemble, AssembleMaxBytes: int64(f.assembleMiB) << 20, Seed: f.seed,
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

// benchScratch makes the temporary directory the stores go in, under dir
// or the default location, and warns when it is in memory.
func benchScratch(e *env, dir string) (string, error) {
	if dir == "" {
		wd, err := os.Getwd()
		if err != nil {
			return "", err
		}
		if dir, err = bench.DefaultScratch(wd); err != nil {
			return "", err
		}
	}
	scratch, err := os.MkdirTemp(dir, "kvstore-bench-")
	if err != nil {
		return "", fmt.Errorf("scratch directory: %w", err)
	}
	if t, err := bench.FSType(scratch); err == nil && (t == "tmpfs" || t == "ramfs") {
		fmt.Fprintf(e.stderr, "kvstore bench: warning: %s is on %s: cold reads and syncs measure memory, not a disk\n", scratch, t)
	}
	return scratch, nil
}

// benchOutput is what --json prints.
type benchOutput struct {
	Report      *bench.Report          `json:"report"`
	TTFT        []bench.TTFTRow        `json:"ttft,omitempty"`
	Assumptions *bench.TTFTAssumptions `json:"ttft_assumptions,omitempty"`
}

func writeBench(w io.Writer, rep *bench.Report, f benchFlags) error {
	packets := []int{1}
	if f.assemble > 1 {
		packets = append(packets, f.assemble)
	}
	out := benchOutput{Report: rep}
	if f.ttft {
		a := bench.H200
		out.TTFT, out.Assumptions = bench.TTFT(rep, a, packets), &a
	}
	if f.save != "" {
		var b bytes.Buffer
		if err := encodeJSON(&b, out); err != nil {
			return err
		}
		if err := os.WriteFile(f.save, b.Bytes(), 0o644); err != nil {
			return fmt.Errorf("save report: %w", err)
		}
	}
	if f.json {
		return encodeJSON(w, out)
	}
	if err := rep.WriteTable(w); err != nil {
		return err
	}
	if f.ttft {
		fmt.Fprintln(w)
		return bench.WriteTTFT(w, *out.Assumptions, out.TTFT)
	}
	return nil
}
