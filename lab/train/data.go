package train

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/lab/llama"
)

// Request is one retrieval request to train or measure on: BOS, the
// documents (each to be prefilled alone as a packet) and a question.
type Request struct {
	Docs     [][]int
	Question []int
}

// Flat is the request as one sequence: BOS, the documents, the question.
func (r Request) Flat() []int {
	out := []int{BOS}
	for _, d := range r.Docs {
		out = append(out, d...)
	}
	return append(out, r.Question...)
}

// BOS is the begin-of-sequence token of the llama2.c models kvstore tests
// with (stories260K, gocode-hd64).
const BOS = 1

// Source cuts documents and questions.
type Source interface {
	// Chunk returns n tokens drawn with rng; a chunk the source cannot
	// give (longer than any of its files, a negative length) is an error
	// wrapping format.ErrInvalidArgument, and a failed forward pass is
	// returned as it is.
	Chunk(rng *rand.Rand, n int) ([]int, error)
}

// Sampled is a model's own text: a sequence sampled from BOS at
// temperature 1, of which the tokens after the first Skip are returned (so
// that a chunk starts mid-text, as a document cut from a longer one does).
type Sampled struct {
	Model *llama.Model
	Skip  int
}

// Chunk samples Skip+n tokens after BOS and returns the last n.
func (s Sampled) Chunk(rng *rand.Rand, n int) ([]int, error) {
	if n < 0 || s.Skip < 0 {
		return nil, fmt.Errorf("%w: train: a sampled chunk of %d tokens, %d skipped", format.ErrInvalidArgument, n, s.Skip)
	}
	toks := []int{BOS}
	res, err := s.Model.Forward(toks, 0, nil, llama.ForwardOptions{LastOnly: true})
	for err == nil && len(toks) < 1+s.Skip+n {
		p := llama.Probs(res.Logits[0])
		next, u := len(p)-1, rng.Float64()
		for i, pi := range p {
			if u -= pi; u <= 0 {
				next = i
				break
			}
		}
		toks = append(toks, next)
		res, err = s.Model.Forward([]int{next}, int64(len(toks)-1), res.Cache, llama.ForwardOptions{LastOnly: true})
	}
	if err != nil {
		return nil, fmt.Errorf("train: sampling a chunk: %w", err)
	}
	return toks[1+s.Skip:], nil
}

// ByteFiles cuts chunks of bytes (one token per byte, as byte-level models
// read them) from files, byte BOS replaced by a space.
type ByteFiles struct{ Files [][]byte }

// LoadByteFiles reads the files SourceFiles lists, byte BOS replaced by a
// space, in lexical order.
func LoadByteFiles(root, suffix string, keep func(path string) bool, min int) (*ByteFiles, error) {
	paths, err := SourceFiles(root, suffix, keep, min)
	if err != nil {
		return nil, err
	}
	b := &ByteFiles{}
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("train: reading %s: %w", root, err)
		}
		b.Files = append(b.Files, bytes.ReplaceAll(data, []byte{BOS}, []byte{' '}))
	}
	return b, nil
}

// SourceFiles lists every file under root whose name ends in suffix, that
// keep accepts (nil: all) and that has at least min bytes, skipping
// directories named testdata or vendor, in lexical order. No file is an
// error.
func SourceFiles(root, suffix string, keep func(path string) bool, min int) ([]string, error) {
	var out []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || d.Name() == "vendor") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, suffix) || (keep != nil && !keep(p)) {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if info.Size() >= int64(min) {
			out = append(out, p)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("train: reading %s: %w", root, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("train: no %s files of %d bytes or more under %s", suffix, min, root)
	}
	return out, nil
}

// NotTest accepts every path but Go test files (names ending in
// _test.go): kvstore's quality harnesses hold test files out as the unseen
// documents, so training must not read them.
func NotTest(path string) bool { return !strings.HasSuffix(path, "_test.go") }

// Chunk returns n consecutive bytes of a random file (of at least n).
func (b *ByteFiles) Chunk(rng *rand.Rand, n int) ([]int, error) {
	if n < 0 || !slices.ContainsFunc(b.Files, func(f []byte) bool { return len(f) >= n }) {
		return nil, fmt.Errorf("%w: train: no file of %d bytes or more for a chunk", format.ErrInvalidArgument, n)
	}
	var f []byte
	for len(f) < n {
		f = b.Files[rng.IntN(len(b.Files))]
	}
	off := rng.IntN(len(f) - n + 1)
	out := make([]int, n)
	for i, c := range f[off : off+n] {
		out[i] = int(c)
	}
	return out, nil
}

// Requests draws n requests of docsMin to docsMax documents of docLen
// tokens and a question of qLen tokens, each from its own chunk. ctx is
// checked before every request: once it is done, Requests returns its
// error, wrapped.
func Requests(ctx context.Context, src Source, rng *rand.Rand, n, docsMin, docsMax, docLen, qLen int) ([]Request, error) {
	if docsMin < 0 || docsMax < docsMin {
		return nil, fmt.Errorf("%w: train: %d to %d documents per request", format.ErrInvalidArgument, docsMin, docsMax)
	}
	var out []Request
	for i := range n {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("train: stopped drawing request %d of %d: %w", i+1, n, err)
		}
		k := docsMin + rng.IntN(docsMax-docsMin+1)
		q, err := src.Chunk(rng, qLen)
		if err != nil {
			return nil, err
		}
		r := Request{Question: q}
		for range k {
			d, err := src.Chunk(rng, docLen)
			if err != nil {
				return nil, err
			}
			r.Docs = append(r.Docs, d)
		}
		out = append(out, r)
	}
	return out, nil
}

// Examples turns requests into distillation examples (Example with a BOS
// prefix) of answer tokens each. ctx is checked before every request: once
// it is done, Examples returns its error, wrapped.
func Examples(ctx context.Context, m *llama.Model, rs []Request, answer int) ([]*llama.PacketExample, error) {
	var out []*llama.PacketExample
	for i, r := range rs {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("train: stopped before the example of request %d of %d: %w", i+1, len(rs), err)
		}
		ex, err := Example(m, []int{BOS}, r.Docs, r.Question, answer)
		if err != nil {
			return nil, fmt.Errorf("train: request %d: %w", i, err)
		}
		out = append(out, ex)
	}
	return out, nil
}
