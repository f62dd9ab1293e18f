package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/kvstore/kvstore/lab/bench"
)

// measure parses args, runs the measurement in a scratch directory it
// removes afterwards, and prints the report.
func measure(args []string, stdout, stderr io.Writer) error {
	o, err := parseOptions(args, stderr)
	if err != nil {
		return err
	}
	cfg, err := o.config()
	if err != nil {
		return err
	}
	scratch, err := makeScratch(stderr, o.dir)
	if err != nil {
		return err
	}
	defer os.RemoveAll(scratch)
	cfg.Dir = scratch
	prog := newStatus(stderr) // quiet unless stderr is a terminal
	cfg.Progress = prog.show
	rep, runErr := bench.Run(cfg)
	prog.clear()
	if rep == nil {
		return usageIf(runErr)
	}
	if err := write(stdout, rep, o); err != nil {
		return err
	}
	return runErr
}

// makeScratch makes the temporary directory the stores go in, under dir
// or the default location, and warns when it is in memory.
func makeScratch(stderr io.Writer, dir string) (string, error) {
	if dir == "" {
		wd, err := os.Getwd()
		if err != nil {
			return "", err
		}
		if dir, err = bench.DefaultScratch(wd); err != nil {
			return "", err
		}
	}
	scratch, err := os.MkdirTemp(dir, "kvbench-")
	if err != nil {
		return "", fmt.Errorf("scratch directory: %w", err)
	}
	if t, err := bench.FSType(scratch); err == nil && (t == "tmpfs" || t == "ramfs") {
		fmt.Fprintf(stderr, "kvbench: warning: %s is on %s: cold reads and syncs measure memory, not a disk\n", scratch, t)
	}
	return scratch, nil
}

// output is what --json prints.
type output struct {
	Report      *bench.Report          `json:"report"`
	TTFT        []bench.TTFTRow        `json:"ttft,omitempty"`
	Assumptions *bench.TTFTAssumptions `json:"ttft_assumptions,omitempty"`
}

// write prints rep as a table or JSON, with the TTFT model when asked, and
// saves the JSON to --save.
func write(w io.Writer, rep *bench.Report, o options) error {
	packets := []int{1}
	if o.assemble > 1 {
		packets = append(packets, o.assemble)
	}
	out := output{Report: rep}
	if o.ttft {
		a := bench.H200
		out.TTFT, out.Assumptions = bench.TTFT(rep, a, packets), &a
	}
	if o.save != "" {
		var b bytes.Buffer
		if err := encodeJSON(&b, out); err != nil {
			return err
		}
		if err := os.WriteFile(o.save, b.Bytes(), 0o644); err != nil {
			return fmt.Errorf("save report: %w", err)
		}
	}
	if o.json {
		return encodeJSON(w, out)
	}
	if err := rep.WriteTable(w); err != nil {
		return err
	}
	if o.ttft {
		fmt.Fprintln(w)
		return bench.WriteTTFT(w, *out.Assumptions, out.TTFT)
	}
	return nil
}

// encodeJSON writes v as indented JSON.
func encodeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
