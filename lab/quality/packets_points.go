package quality

import (
	"cmp"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"

	"github.com/kvstore/kvstore/format"
)

// Operating points over many texts.
//
// RunPoints is RunPackets on each of several held-out files (GoBOS and the
// file's first Context+Continuation-1 bytes, as RunLongText reads them),
// one row per (codec setting, policy, kept fraction or mass share) with
// each file's figures, so that a point can be judged by its worst text as
// well as its median.

// HeldOutSplit returns the texts of an operating-point run: the _test.go
// files under root (GOROOT/src) of at least window bytes
// (HeldOutGoFiles), shuffled by seed; the first tune of them are the
// tuning set, on which policies' parameters are chosen, the next eval the
// evaluation set, disjoint from it by construction.
func HeldOutSplit(root string, window, tune, eval int, seed uint64) (tuning, evaluation []string, err error) {
	all, err := HeldOutGoFiles(root, window)
	if err != nil {
		return nil, nil, err
	}
	if tune < 0 || eval < 0 || len(all) < tune+eval {
		return nil, nil, fmt.Errorf("%w: quality: %d held-out files of >= %d bytes under %s, want %d + %d", format.ErrInvalidArgument, len(all), window, root, tune, eval)
	}
	rand.New(rand.NewPCG(seed, 0x66696c65)).Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
	return all[:tune], all[tune : tune+eval], nil
}

// PointsConfig is RunPoints' measurement: Packet's model, lengths, codecs,
// policies and fractions (its Text and BOS are set per file), over Files.
type PointsConfig struct {
	Packet PacketConfig
	Files  []string
	// Progress, when not nil, is called after each file.
	Progress func(i int, file string)
}

// PointRow is one point over the files: per file, in file order, the
// mean and largest KL over the continuation, the stored bytes per token
// (and their share of bf16's) and the fraction of rows kept.
type PointRow struct {
	Setting                                string
	Codec                                  format.Codec
	Policy                                 string
	Keep                                   float64
	KL, MaxKL, BytesPerToken, OfBF16, Kept []float64
}

// MedianKL, WorstKL, MedianOfBF16, WorstOfBF16, MedianBytes and WorstBytes
// summarize a point's files (worst bytes: the most).
func (r *PointRow) MedianKL() float64     { return median(r.KL) }
func (r *PointRow) WorstKL() float64      { return slices.Max(r.KL) }
func (r *PointRow) MedianOfBF16() float64 { return median(r.OfBF16) }
func (r *PointRow) WorstOfBF16() float64  { return slices.Max(r.OfBF16) }
func (r *PointRow) MedianBytes() float64  { return median(r.BytesPerToken) }
func (r *PointRow) WorstBytes() float64   { return slices.Max(r.BytesPerToken) }

// PointsReport is RunPoints' result.
type PointsReport struct {
	Name                     string
	Layers, KVHeads, HeadDim int
	Context, Continuation    int
	Files                    []string
	Rows                     []PointRow
}

// RunPoints measures every point of cfg.Packet on every file.
func RunPoints(cfg PointsConfig) (*PointsReport, error) {
	pc := cfg.Packet
	if pc.Model == nil || len(cfg.Files) == 0 {
		return nil, fmt.Errorf("%w: quality: points: model %v, %d files", format.ErrInvalidArgument, pc.Model != nil, len(cfg.Files))
	}
	window := pc.Context + pc.Continuation
	rep := &PointsReport{Name: pc.Name, Files: cfg.Files}
	index := map[[3]string]int{}
	for i, f := range cfg.Files {
		b, err := goBytes(f, window-1)
		if err != nil {
			return nil, err
		}
		pc.Text, pc.BOS = appendBytes([]int{GoBOS}, b), GoBOS
		r, err := RunPackets(pc)
		if err != nil {
			return nil, fmt.Errorf("quality: points: %s: %w", f, err)
		}
		rep.Layers, rep.KVHeads, rep.HeadDim, rep.Context, rep.Continuation = r.Layers, r.KVHeads, r.HeadDim, r.Context, r.Continuation
		for _, x := range r.Rows {
			key := [3]string{x.Setting, x.Policy, fmt.Sprint(x.Keep)}
			j, ok := index[key]
			if !ok {
				if i > 0 {
					return nil, fmt.Errorf("quality: points: %s: point %v not measured on the first file", f, key)
				}
				j = len(rep.Rows)
				index[key] = j
				rep.Rows = append(rep.Rows, PointRow{Setting: x.Setting, Codec: x.Codec, Policy: x.Policy, Keep: x.Keep})
			}
			p := &rep.Rows[j]
			p.KL, p.MaxKL = append(p.KL, x.KL), append(p.MaxKL, x.MaxKL)
			p.BytesPerToken, p.OfBF16, p.Kept = append(p.BytesPerToken, x.BytesPerToken), append(p.OfBF16, x.OfBF16), append(p.Kept, x.Kept)
		}
		if cfg.Progress != nil {
			cfg.Progress(i, f)
		}
	}
	for _, p := range rep.Rows {
		if len(p.KL) != len(cfg.Files) {
			return nil, fmt.Errorf("quality: points: %s %s %v measured on %d of %d files", p.Setting, p.Policy, p.Keep, len(p.KL), len(cfg.Files))
		}
	}
	return rep, nil
}

// Row returns the point of a setting, policy and kept fraction (mass
// share), and false when there is none.
func (r *PointsReport) Row(setting, policy string, keep float64) (PointRow, bool) {
	for _, p := range r.Rows {
		if p.Setting == setting && p.Policy == policy && p.Keep == keep {
			return p, true
		}
	}
	return PointRow{}, false
}

// Markdown writes the points sorted by median bytes per token, marking
// those whose worst KL is at most bound.
func (r *PointsReport) Markdown(w io.Writer, bound float64) error {
	rows := slices.Clone(r.Rows)
	slices.SortStableFunc(rows, func(a, b PointRow) int {
		return cmp.Or(cmp.Compare(a.MedianBytes(), b.MedianBytes()), cmp.Compare(a.WorstKL(), b.WorstKL()))
	})
	if _, err := fmt.Fprintf(w, "**%s**: %d layers x %d KV heads x head dim %d, context %d tokens, continuation %d, %d texts.\n\n"+
		"| codec | pruning | kept (median / most) | bytes/token (median / most) | of bf16 (median / most) | KL median | KL worst | worst max-step KL | worst <= %g |\n|---|---|---|---|---|---|---|---|---|\n",
		r.Name, r.Layers, r.KVHeads, r.HeadDim, r.Context, r.Continuation, len(r.Files), bound); err != nil {
		return err
	}
	for _, x := range rows {
		kept := fmt.Sprintf("%.0f%%", 100*x.Keep)
		switch x.Policy {
		case PolicyMass:
			kept = fmt.Sprintf("mass %g: %.1f%% / %.1f%%", x.Keep, 100*median(x.Kept), 100*slices.Max(x.Kept))
		case PolicyCheck:
			kept = fmt.Sprintf("probe KL <= %g: %.1f%% / %.1f%%", x.Keep, 100*median(x.Kept), 100*slices.Max(x.Kept))
		}
		mark := ""
		if x.WorstKL() <= bound {
			mark = "yes"
		}
		if _, err := fmt.Fprintf(w, "| %s | %s | %s | %.1f / %.1f | %.1f%% / %.1f%% | %.2e | %.2e | %.2e | %s |\n",
			x.Setting, x.Policy, kept, x.MedianBytes(), x.WorstBytes(), 100*x.MedianOfBF16(), 100*x.WorstOfBF16(),
			x.MedianKL(), x.WorstKL(), slices.Max(x.MaxKL), mark); err != nil {
			return err
		}
	}
	_, err := fmt.Fprintln(w)
	return err
}
