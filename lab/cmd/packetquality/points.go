package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/internal/testenv"
	"github.com/kvstore/kvstore/lab/llama"
	"github.com/kvstore/kvstore/lab/quality"
)

// pointsFlags are the flags of -points.
type pointsFlags struct {
	model            string // gocode or gocode2k
	eval, tune       int
	set              string // eval or tune
	seed             uint64
	context, cont    int
	codecs, policies string
	keeps, mass      string
	massMin, bound   float64
	queries, observe int
	json             string
	check            string
	checkProbe       int
	hybridRecent     float64
}

func splitFloats(s string) ([]float64, error) {
	if s == "" {
		return nil, nil
	}
	var out []float64
	for _, f := range strings.Split(s, ",") {
		x, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil {
			return nil, err
		}
		out = append(out, x)
	}
	return out, nil
}

func parseCodecs(s string) ([]format.Codec, error) {
	var out []format.Codec
	for _, name := range strings.Split(s, ",") {
		name = strings.TrimSpace(name)
		found := false
		for _, c := range []format.Codec{format.CodecRaw, format.CodecShuffleZstd, format.CodecInt8, format.CodecInt4} {
			if c.String() == name {
				out, found = append(out, c), true
			}
		}
		if !found {
			return nil, fmt.Errorf("unknown codec %q", name)
		}
	}
	return out, nil
}

// runPoints is -points: quality.RunPoints over held-out files.
func runPoints(pf pointsFlags) error {
	file := map[string]string{"gocode": "gocode-hd64.bin", "gocode2k": "gocode-2k.bin"}[pf.model]
	if file == "" {
		return fmt.Errorf("-points: -model %q: want gocode or gocode2k", pf.model)
	}
	p, ok := testenv.ModelPath(file)
	if !ok {
		return fmt.Errorf("%s not found at %q (set KVSTORE_TESTDATA or KVSTORE_TESTMODEL)", file, p)
	}
	m, err := llama.Load(p)
	if err != nil {
		return err
	}
	codecs, err := parseCodecs(pf.codecs)
	if err != nil {
		return err
	}
	keeps, err := splitFloats(pf.keeps)
	if err != nil {
		return fmt.Errorf("-keeps: %w", err)
	}
	mass, err := splitFloats(pf.mass)
	if err != nil {
		return fmt.Errorf("-mass: %w", err)
	}
	check, err := splitFloats(pf.check)
	if err != nil {
		return fmt.Errorf("-points-check: %w", err)
	}
	var policies []string
	if pf.policies != "" {
		policies = strings.Split(pf.policies, ",")
	} else {
		policies = []string{}
	}
	window := pf.context + pf.cont
	root, err := quality.GoSrcDir("")
	if err != nil {
		return err
	}
	tuning, evaluation, err := quality.HeldOutSplit(root, window, pf.tune, pf.eval, pf.seed)
	if err != nil {
		return err
	}
	files := evaluation
	if pf.set == "tune" {
		files = tuning
	} else if pf.set != "eval" {
		return fmt.Errorf("-points-set %q: want eval or tune", pf.set)
	}
	name := fmt.Sprintf("%s, %s set: the first %d bytes of %d held-out _test.go files of %s (seed %d; tuning set the first %d of the shuffled list, evaluation the next %d)",
		strings.TrimSuffix(file, ".bin"), pf.set, window-1, len(files), root, pf.seed, pf.tune, pf.eval)
	start := time.Now()
	rep, err := quality.RunPoints(quality.PointsConfig{
		Packet: quality.PacketConfig{Name: name, Model: m, Context: pf.context, Continuation: pf.cont, Codecs: codecs,
			Keeps: keeps, Policies: policies, Mass: mass, MassMin: pf.massMin, HybridRecent: pf.hybridRecent, Check: check, CheckProbe: pf.checkProbe, TOVAQueries: pf.queries, Observe: pf.observe},
		Files: files,
		Progress: func(i int, f string) {
			rel, _ := filepath.Rel(root, f)
			fmt.Fprintf(os.Stderr, "%d/%d %s %v\n", i+1, len(files), rel, time.Since(start).Round(time.Second))
		},
	})
	if err != nil {
		return err
	}
	if pf.json != "" {
		b, err := json.MarshalIndent(rep, "", " ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(pf.json, b, 0o644); err != nil {
			return err
		}
	}
	if err := rep.Markdown(os.Stdout, pf.bound); err != nil {
		return err
	}
	fmt.Println("Texts:")
	for i, f := range rep.Files {
		rel, _ := filepath.Rel(root, f)
		fmt.Printf("%d. %s\n", i+1, rel)
	}
	return nil
}
