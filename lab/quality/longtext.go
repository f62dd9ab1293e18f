package quality

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/kvstore/kvstore/format"
)

// LongTextConfig is a natural long-text measurement: the first Window
// tokens of each file (GoBOS and its bytes), the memory built from the
// first Window-Tail, the last Tail decoded teacher-forced.
type LongTextConfig struct {
	LongConfig
	Files        []string
	Window, Tail int
	// Progress, when not nil, is called after each file (err: left out,
	// its span memory not built).
	Progress func(i int, file string, err error)
}

// LongTextRow is one method at one budget over the files: KL(full ||
// method) (mean over the tail, in nats) and top-1 agreement with full
// attention, each file's median and worst.
type LongTextRow struct {
	Budget float64
	Method string
	Files  int
	// KL and Top1 per file, in file order.
	KL, Top1 []float64
	// Rows is the most context rows of one (layer, KV head), as a fraction
	// of the context; OverBudget as NeedleRow's.
	Rows       float64
	OverBudget bool
}

// MedianKL, WorstKL, MedianTop1 and WorstTop1 summarize a row's files.
func (r *LongTextRow) MedianKL() float64   { return median(r.KL) }
func (r *LongTextRow) WorstKL() float64    { return slices.Max(r.KL) }
func (r *LongTextRow) MedianTop1() float64 { return median(r.Top1) }
func (r *LongTextRow) WorstTop1() float64  { return slices.Min(r.Top1) }

func median(x []float64) float64 { return Median(x) }

// Median is x's median (the mean of the two middle values of an even
// count); NaN for none.
func Median(x []float64) float64 {
	s := slices.Sorted(slices.Values(x))
	switch {
	case len(s) == 0:
		return math.NaN()
	case len(s)%2 == 1:
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// Mean is x's mean; NaN for none.
func Mean(x []float64) float64 {
	var s float64
	for _, v := range x {
		s += v
	}
	return s / float64(len(x))
}

// RunLongText measures every method (but MethodSnapKVQuery: there is no
// query) at every budget over the files, leaving out (and counting) those
// whose span memory could not be built, as RunNeedles does.
func RunLongText(cfg LongTextConfig) (rows []LongTextRow, skipped int, err error) {
	if err := cfg.defaults(); err != nil {
		return nil, 0, err
	}
	if len(cfg.Files) == 0 || cfg.Tail < 1 || cfg.Window-cfg.Tail < 2*sinks {
		return nil, 0, fmt.Errorf("%w: quality: long text: %d files, window %d, tail %d", format.ErrInvalidArgument, len(cfg.Files), cfg.Window, cfg.Tail)
	}
	for i, f := range cfg.Files {
		b, err := goBytes(f, cfg.Window-1)
		if err != nil {
			return nil, skipped, err
		}
		toks := appendBytes([]int{GoBOS}, b)
		n := cfg.Window - cfg.Tail
		runs, err := cfg.runMethods(toks[:n], toks[n:], 0)
		if errors.Is(err, errSpanBuild) {
			skipped++
			if cfg.Progress != nil {
				cfg.Progress(i, f, err)
			}
			continue
		}
		if err != nil {
			return nil, skipped, fmt.Errorf("quality: long text %s: %w", f, err)
		}
		if rows == nil {
			for _, r := range runs[1:] {
				rows = append(rows, LongTextRow{Budget: r.Budget, Method: r.Method})
			}
		}
		full := runs[0].Logits
		for j, r := range runs[1:] {
			s := score(full, r.Logits)
			row := &rows[j]
			row.Files++
			row.KL, row.Top1 = append(row.KL, s.KL), append(row.Top1, s.Top1)
			row.Rows = max(row.Rows, r.Rows/float64(n))
			row.OverBudget = row.OverBudget || r.Over || r.Rows > r.Limit
		}
		if cfg.Progress != nil {
			cfg.Progress(i, f, nil)
		}
	}
	if rows == nil {
		return nil, skipped, fmt.Errorf("%w: every file left out", errSpanBuild)
	}
	return rows, skipped, nil
}
