package quality

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/lab/llama"
	"github.com/kvstore/kvstore/lab/train"
)

// HeldOutGoSrc is HeldOutGoFiles over the Go toolchain's GOROOT/src
// (GoSrcDir), and that root.
func HeldOutGoSrc(minBytes int) (files []string, root string, err error) {
	if root, err = GoSrcDir(""); err != nil {
		return nil, "", err
	}
	files, err = HeldOutGoFiles(root, minBytes)
	return files, root, err
}

// TrainingGoSrc lists the non-test .go files under GOROOT/src (GoSrcDir)
// of at least minBytes bytes, gocode-2k's training text (train.SourceFiles
// with train.NotTest), and that root: the text settings are chosen on.
func TrainingGoSrc(minBytes int) (files []string, root string, err error) {
	if root, err = GoSrcDir(""); err != nil {
		return nil, "", err
	}
	files, err = train.SourceFiles(root, ".go", train.NotTest, minBytes)
	return files, root, err
}

// HeldOutGoFiles lists the _test.go files under root (GOROOT/src) of at
// least minBytes bytes, outside testdata and vendor directories, sorted:
// Go that gocode-hd64 and gocode-2k never saw in training.
func HeldOutGoFiles(root string, minBytes int) ([]string, error) {
	var out []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); n == "testdata" || n == "vendor" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, "_test.go") {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if info.Size() >= int64(minBytes) {
			out = append(out, p)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("quality: held-out go files: %w", err)
	}
	slices.Sort(out)
	return out, nil
}

// goBytes reads a file's first n bytes as tokens (byte GoBOS turned into a
// space, as in training).
func goBytes(path string, n int) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("quality: %w", err)
	}
	if len(b) < n {
		return nil, fmt.Errorf("%w: quality: %s has %d bytes, want %d", format.ErrInvalidArgument, path, len(b), n)
	}
	b = slices.Clone(b[:n])
	for i, c := range b {
		if c == GoBOS {
			b[i] = ' '
		}
	}
	return b, nil
}

// Needle is a window of held-out Go with constants defined in it and one
// recalled at its end, gocode-2k's training format: lines
// `const NAME = "VALUE"` (NAME 4-8 random lowercase letters, VALUE 6-12)
// at line starts of the filler, and the last line `\treturn NAME // "VALUE"`.
type Needle struct {
	// Tokens are GoBOS, the filler with the definitions, the recall line.
	Tokens []int
	// Context is the tokens before the recall line; Query the recall
	// line's tokens before the value, which spans
	// Tokens[Context+Query : Context+Query+ValueLen].
	Context, Query, ValueLen int
	// Depth is where the recalled definition starts, as a fraction of the
	// window.
	Depth float64
	// Def is the recalled definition line's tokens, Tokens[Def[0]:Def[1]]
	// (its newline included).
	Def [2]int
}

// third is the third of the depths, [0, 0.3), [0.3, 0.6) or [0.6, 0.9),
// the recalled definition lies in: 0, 1 or 2.
func (nd *Needle) third() int { return min(2, int(nd.Depth/0.3)) }

// NewNeedle builds a needle of at most window tokens from filler (whole
// lines of it, the first ones), keys definitions, the recalled one at
// depth (a fraction of the window, in [0, 0.9)), the others at random
// depths in [0, 0.9).
func NewNeedle(filler []byte, window, keys int, depth float64, rng *rand.Rand) (*Needle, error) {
	if keys < 1 || !(depth >= 0 && depth < 0.9) {
		return nil, fmt.Errorf("%w: quality: needle of %d keys at depth %v", format.ErrInvalidArgument, keys, depth)
	}
	names := map[string]bool{}
	type def struct {
		name, value string
		at          int // filler offset, a line start
	}
	defs := make([]def, keys)
	lines := 0
	for i := range defs {
		for defs[i].name == "" || names[defs[i].name] {
			defs[i].name = letters(rng, 4+rng.IntN(5))
		}
		names[defs[i].name] = true
		defs[i].value = letters(rng, 6+rng.IntN(7))
		lines += len(defLine(defs[i].name, defs[i].value))
	}
	recall := "\treturn " + defs[0].name + ` // "`
	tail := defs[0].value + `"`
	room := window - 1 - lines - len(recall) - len(tail)
	if room < window/2 || len(filler) < room {
		return nil, fmt.Errorf("%w: quality: needle: %d filler bytes for %d of room", format.ErrInvalidArgument, len(filler), room)
	}
	body := filler[:room]
	body = body[:strings.LastIndexByte(string(body), '\n')+1]
	lineStart := func(at int) int { return strings.LastIndexByte(string(body[:min(at, len(body))]), '\n') + 1 }
	defs[0].at = lineStart(int(depth * float64(window)))
	for i := 1; i < keys; i++ {
		defs[i].at = lineStart(int(0.9 * rng.Float64() * float64(window)))
	}
	order := make([]int, keys)
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return defs[a].at - defs[b].at })
	nd := &Needle{Tokens: []int{GoBOS}}
	at := 0
	for _, i := range order {
		nd.Tokens = appendBytes(nd.Tokens, body[at:defs[i].at])
		at = defs[i].at
		if i == 0 {
			nd.Depth = float64(len(nd.Tokens)) / float64(window)
		}
		start := len(nd.Tokens)
		nd.Tokens = appendBytes(nd.Tokens, []byte(defLine(defs[i].name, defs[i].value)))
		if i == 0 {
			nd.Def = [2]int{start, len(nd.Tokens)}
		}
	}
	nd.Tokens = appendBytes(nd.Tokens, body[at:])
	nd.Context, nd.Query, nd.ValueLen = len(nd.Tokens), len(recall), len(defs[0].value)
	nd.Tokens = appendBytes(appendBytes(nd.Tokens, []byte(recall)), []byte(tail))
	return nd, nil
}

func defLine(name, value string) string { return "const " + name + ` = "` + value + "\"\n" }

func letters(rng *rand.Rand, n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte('a' + rng.IntN(26))
	}
	return string(b)
}

func appendBytes(t []int, b []byte) []int {
	for _, c := range b {
		t = append(t, int(c))
	}
	return t
}

// NeedleScore is how well one method recalled one needle's value,
// teacher-forced: the mean log-prob of its bytes, the share of its bytes
// that are the argmax, and whether all are.
type NeedleScore struct {
	LogProb, Top1 float64
	Exact         bool
}

// scoreNeedle scores logits over the needle's recall line (logits[i]
// predicts its token i+1).
func scoreNeedle(nd *Needle, logits [][]float32) NeedleScore {
	s := NeedleScore{Exact: true}
	cont := nd.Tokens[nd.Context:]
	for j := nd.Query; j < nd.Query+nd.ValueLen; j++ {
		l := logits[j-1]
		s.LogProb += llama.LogProbs(l)[cont[j]]
		if llama.LogitsArgmax(l) == cont[j] {
			s.Top1++
		} else {
			s.Exact = false
		}
	}
	s.LogProb /= float64(nd.ValueLen)
	s.Top1 /= float64(nd.ValueLen)
	return s
}

// NeedleRow is one method at one budget over a set of needles.
type NeedleRow struct {
	Budget float64 // 1 for MethodFull
	Method string
	// Needles measured; LogProb and Top1 their means, Exact how many were
	// recalled whole.
	Needles       int
	LogProb, Top1 float64
	Exact         int
	// Rows is the most context rows of one (layer, KV head) over the
	// needles and steps, as a fraction of the context (methodRun.Rows);
	// OverBudget: more than the budget's rows for some needle.
	Rows       float64
	OverBudget bool
	// Scores are the needles' own scores, in needle order.
	Scores []NeedleScore
	// DepthTop1 is Top1 over the needles whose recalled definition lies in
	// each third of [0, 0.9) of the window; DepthNeedles their counts.
	DepthTop1    [3]float64
	DepthNeedles [3]int
}

// NeedleConfig is a needle measurement.
type NeedleConfig struct {
	LongConfig
	// Files are the filler's held-out files, used in turn; Window the
	// needles' length in tokens; Needles how many, their recalled
	// definitions at depths (i+0.5)/Needles*0.9; Keys the definitions per
	// needle (1: single needle).
	Files                 []string
	Window, Needles, Keys int
	Seed                  uint64
	// Progress, when not nil, is called after each needle (err: left
	// out, its span memory not built).
	Progress func(i int, nd *Needle, err error)
}

// RunNeedles measures every method at every budget over the needles. It
// leaves out, and counts in skipped, the needles whose span memory could
// not be built, so that every method is measured on the same needles.
func RunNeedles(cfg NeedleConfig) (rows []NeedleRow, skipped int, err error) {
	if err := cfg.defaults(); err != nil {
		return nil, 0, err
	}
	skipped, err = cfg.eachNeedle(func(nd *Needle) error {
		runs, err := cfg.runMethods(nd.Tokens[:nd.Context], nd.Tokens[nd.Context:], nd.Query)
		if err != nil {
			return err
		}
		if rows == nil {
			for _, r := range runs {
				rows = append(rows, NeedleRow{Budget: r.Budget, Method: r.Method})
			}
		}
		for j, r := range runs {
			s := scoreNeedle(nd, r.Logits)
			row := &rows[j]
			row.Needles++
			row.Scores = append(row.Scores, s)
			row.LogProb += s.LogProb
			third := nd.third()
			row.DepthTop1[third] += s.Top1
			row.DepthNeedles[third]++
			row.Top1 += s.Top1
			if s.Exact {
				row.Exact++
			}
			row.Rows = max(row.Rows, r.Rows/float64(nd.Context))
			row.OverBudget = row.OverBudget || r.Over || r.Rows > r.Limit
		}
		return nil
	})
	if err != nil {
		return nil, skipped, err
	}
	for j := range rows {
		rows[j].LogProb /= float64(rows[j].Needles)
		rows[j].Top1 /= float64(rows[j].Needles)
		for d, n := range rows[j].DepthNeedles {
			if n > 0 {
				rows[j].DepthTop1[d] /= float64(n)
			}
		}
	}
	return rows, skipped, nil
}

// Chance is the top-1 of a uniform guess among the 26 lowercase letters a
// needle's value is drawn from.
const Chance = 1.0 / 26

// eachNeedle makes cfg's needles in order (filler from Files in turn, the
// recalled definition at depth (i+0.5)/Needles*0.9, one seeded generator
// for all, so every runner measures the same needles) and calls run on
// each. A needle whose span memory could not be built (run's error wraps
// errSpanBuild) is left out and counted in skipped; any other error ends
// the loop. Progress, when set, is told of every needle. It is an error
// wrapping errSpanBuild if every needle was left out.
func (cfg *NeedleConfig) eachNeedle(run func(nd *Needle) error) (skipped int, err error) {
	if len(cfg.Files) == 0 || cfg.Needles < 1 {
		return 0, fmt.Errorf("%w: quality: needles: %d files, %d needles", format.ErrInvalidArgument, len(cfg.Files), cfg.Needles)
	}
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x6e656564))
	for i := range cfg.Needles {
		f := cfg.Files[i%len(cfg.Files)]
		filler, err := goBytes(f, cfg.Window)
		if err != nil {
			return skipped, err
		}
		nd, err := NewNeedle(filler, cfg.Window, cfg.Keys, (float64(i)+0.5)/float64(cfg.Needles)*0.9, rng)
		if err != nil {
			return skipped, fmt.Errorf("quality: needle %d (%s): %w", i, f, err)
		}
		err = run(nd)
		if errors.Is(err, errSpanBuild) {
			skipped++
		} else if err != nil {
			return skipped, fmt.Errorf("quality: needle %d (%s): %w", i, f, err)
		}
		if cfg.Progress != nil {
			cfg.Progress(i, nd, err)
		}
	}
	if skipped == cfg.Needles {
		return skipped, fmt.Errorf("%w: every needle left out", errSpanBuild)
	}
	return skipped, nil
}
