package quality

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/internal/testenv"
	"github.com/kvstore/kvstore/lab/llama"
)

// text returns n tokens: the first n of given when it has them, else a
// sample of the model.
func text(m *llama.Model, given []int, bos, n int, seed uint64) ([]int, error) {
	if len(given) >= n {
		for i, t := range given[:n] {
			if t < 0 || t >= m.Vocab {
				return nil, fmt.Errorf("%w: quality: text token %d is %d, outside the vocab", format.ErrInvalidArgument, i, t)
			}
		}
		return given[:n], nil
	}
	return sample(m, bos, n, seed)
}

// GoBOS is gocode-hd64's BOS token (byte 0x01, which its training text
// never holds).
const GoBOS = 1

// GoText is held-out text for gocode-hd64 (trained on the Go standard
// library's non-test files): the _test.go files of dir in name order, each
// as its bytes after a GoBOS token (byte 0x01 turned into a space, as in
// training), concatenated until n tokens. It returns the tokens and the
// files it read. A directory with too little text is ErrInvalidArgument.
func GoText(dir string, n int) ([]int, []string, error) { return GoDocs(dir, n, 0) }

// GoDocs is GoText with each file cut to its first docBytes bytes (0:
// whole), so that a context holds several documents: each opens with the
// same license header and package clause, and later ones call what earlier
// ones define, the cross-document references a store of packets serves.
func GoDocs(dir string, n, docBytes int) ([]int, []string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*_test.go"))
	if err != nil {
		return nil, nil, fmt.Errorf("quality: go text: %w", err)
	}
	slices.Sort(files)
	var toks []int
	var used []string
	for _, f := range files {
		if len(toks) >= n {
			break
		}
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, nil, fmt.Errorf("quality: go text: %w", err)
		}
		if docBytes > 0 && len(b) > docBytes {
			b = b[:docBytes]
		}
		toks = append(toks, GoBOS)
		for _, c := range b {
			if c == GoBOS {
				c = ' '
			}
			toks = append(toks, int(c))
		}
		used = append(used, filepath.Base(f))
	}
	if len(toks) < n {
		return nil, nil, fmt.Errorf("%w: quality: go text: %s has %d bytes of _test.go files, want %d",
			format.ErrInvalidArgument, dir, len(toks), n)
	}
	return toks[:n], used, nil
}

// GoTextName labels GoText's text in reports: the directory relative to
// GOROOT/src where it is under it, and the files.
func GoTextName(dir string, files []string) string {
	if i := strings.LastIndex(filepath.ToSlash(dir), "/src/"); i >= 0 {
		dir = filepath.ToSlash(dir)[i+len("/src/"):]
	}
	return dir + ": " + strings.Join(files, ", ")
}

// sample draws n tokens after bos from the model at temperature 1 (bos
// included as the first), deterministically for a seed.
func sample(m *llama.Model, bos, n int, seed uint64) ([]int, error) {
	rng := rand.New(rand.NewPCG(seed, 0x5e4b56))
	toks := []int{bos}
	res, err := m.Forward(toks, 0, nil, llama.ForwardOptions{LastOnly: true})
	if err != nil {
		return nil, err
	}
	for len(toks) < n {
		next := draw(res.Logits[0], rng)
		toks = append(toks, next)
		if len(toks) == n {
			break
		}
		if res, err = m.Forward([]int{next}, int64(len(toks)-1), res.Cache, llama.ForwardOptions{LastOnly: true}); err != nil {
			return nil, fmt.Errorf("quality: sampling token %d: %w", len(toks), err)
		}
	}
	return toks, nil
}

// draw samples an index from softmax(logits).
func draw(logits []float32, rng *rand.Rand) int {
	lp := llama.LogProbs(logits)
	u := rng.Float64()
	var acc float64
	for i, v := range lp {
		acc += math.Exp(v)
		if u < acc {
			return i
		}
	}
	return len(lp) - 1
}

// GoSrcDir is the directory of a standard-library package, GOROOT/src/pkg,
// with GOROOT from `go env GOROOT` (the go command on PATH).
func GoSrcDir(pkg string) (string, error) {
	out, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		return "", fmt.Errorf("quality: go env GOROOT: %w", err)
	}
	return filepath.Join(strings.TrimSpace(string(out)), "src", filepath.FromSlash(pkg)), nil
}

// LoadStories loads stories260K (testenv.ModelPath). When the file is not
// there it returns nil and no error, unless required: then the error says
// where it was looked for.
func LoadStories(required bool) (*llama.Model, error) {
	p, ok := testenv.ModelPath("stories260K.bin")
	switch {
	case ok:
		return llama.Load(p)
	case required:
		return nil, fmt.Errorf("stories260K not found at %q (set KVSTORE_TESTDATA or KVSTORE_TESTMODEL)", p)
	}
	return nil, nil
}

// LoadGoCode loads gocode-hd64 (testenv.ModelPath) and, unless pkg is
// empty, n tokens of GoDocs(docBytes) from the standard-library package pkg. name
// labels the model and its text in reports.
func LoadGoCode(pkg string, n, docBytes int) (m *llama.Model, name string, text []int, err error) {
	p, ok := testenv.ModelPath("gocode-hd64.bin")
	if !ok {
		return nil, "", nil, fmt.Errorf("gocode-hd64 not found at %q (set KVSTORE_TESTDATA or KVSTORE_TESTMODEL)", p)
	}
	if m, err = llama.Load(p); err != nil {
		return nil, "", nil, err
	}
	if pkg == "" {
		return m, "gocode-hd64 (real weights, sampled text)", nil, nil
	}
	dir, err := GoSrcDir(pkg)
	if err != nil {
		return nil, "", nil, err
	}
	text, files, err := GoDocs(dir, n, docBytes)
	if err != nil {
		return nil, "", nil, err
	}
	if docBytes > 0 {
		name = fmt.Sprintf(" (first %d bytes of each)", docBytes)
	}
	return m, "gocode-hd64 (real weights), held-out " + GoTextName(dir, files) + name, text, nil
}

// LoadGoCode2k loads gocode-2k (testenv.ModelPath) and returns it with the
// path it was read from.
func LoadGoCode2k() (*llama.Model, string, error) {
	p, ok := testenv.ModelPath("gocode-2k.bin")
	if !ok {
		return nil, p, fmt.Errorf("gocode-2k not found at %q (set KVSTORE_TESTDATA or KVSTORE_TESTMODEL)", p)
	}
	m, err := llama.Load(p)
	return m, p, err
}

// ParseFloats parses a comma-separated list of numbers, as the lab
// commands' budget and keep-ratio flags give them ("" is none).
func ParseFloats(list string) ([]float64, error) {
	if strings.TrimSpace(list) == "" {
		return nil, nil
	}
	var out []float64
	for _, f := range strings.Split(list, ",") {
		x, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil {
			return nil, fmt.Errorf("list %q: %w", list, err)
		}
		out = append(out, x)
	}
	return out, nil
}
