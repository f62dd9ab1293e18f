package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/lab/llama"
	"github.com/kvstore/kvstore/lab/train"
	"github.com/spf13/pflag"
)

// adapterFlags are adapter's flags, parsed.
type adapterFlags struct {
	model modelFlags
	id    string // adapter id; "" for its content id
	data  string // "sampled" or a directory of .go files
	init  string // "stats" or "token"
	// tests: read _test.go files under --data too (they are held out by
	// default); shape: "chunks" or "needle"; initFile, epochDir: resume
	// from and checkpoint to.
	tests              bool
	shape              string
	lossOn             string
	initFile, epochDir string
	initText           string
	docMin             int
	baseline           bool
	initToken          int
	// requests: how many, and their shape.
	requests, docsMin, docsMax, docLen, qLen, answer int
	// training: rows, epochs, batch, lr, seed.
	header, trailer, epochs, batch, workers int
	lr                                      float64
	seed                                    uint64
}

// define adds f's flags, with their defaults, to fs.
func (f *adapterFlags) define(fs *pflag.FlagSet) {
	f.model.define(fs)
	fs.StringVar(&f.id, "id", "", "adapter id (default: its content id, kvp-<hash>)")
	fs.StringVar(&f.data, "data", "sampled", "documents: 'sampled' (the model's own text) or a directory of .go files cut into bytes (byte-level models)")
	fs.BoolVar(&f.tests, "tests", false, "with --data, read _test.go files too (by default they are left out: the quality harnesses evaluate on them); testdata and vendor directories are always skipped")
	fs.StringVar(&f.shape, "shape", "chunks", "requests: 'chunks' (--doc-len-token cuts and an unrelated --question-len question, --answer greedy tokens) or 'needle' (with --data: lab/quality's multi-document needles, --doc-min to --doc-len bytes of whole lines per document, one defining a constant, the question its recall line, the loss over every token of the question and the teacher-forced value)")
	fs.StringVar(&f.lossOn, "loss-on", "all", "--shape needle: the positions the loss covers: 'all' (every token of the question and the value), 'value' (those that predict the value's bytes and its closing quote) or 'both' (every request twice, once each way: the value's positions weigh double)")
	fs.IntVar(&f.docMin, "doc-min", 48, "fewest bytes per document (--shape needle; at least 48)")
	fs.StringVar(&f.initFile, "init-file", "", "start from this adapter (safetensors, as --epoch-dir or kvstore adapter export write them) instead of --init: resumes a run's rows (not its AdamW state or schedule)")
	fs.StringVar(&f.epochDir, "epoch-dir", "", "write the adapter after every epoch to DIR/epoch-N.safetensors (N from 1), to resume from with --init-file or evaluate")
	fs.BoolVar(&f.baseline, "baseline", false, "before training, print to stderr the training examples' loss with no adapter and with the initial one")
	fs.IntVar(&f.initToken, "init-token", train.BOS, "the token whose embedding --init token starts the header rows from (default BOS; 10, a newline, for byte-level models that read documents as cuts of a longer text)")
	fs.StringVar(&f.init, "init", "stats", "starting point: 'stats' (the reference's rows drawn from N(mean, std) of the embeddings, header and trailer visible), 'token' (header rows BOS's embedding, hidden from the question; trailer rows the mean embedding) or 'text' (a hidden header of --init-text's bytes, one row per byte; --header is then its length)")
	fs.StringVar(&f.initText, "init-text", "", "--init text: a file whose bytes (byte-level models: one token per byte) every document is prefilled after, their rows then dropped")
	fs.IntVar(&f.header, "header", 8, "header rows N_h")
	fs.IntVar(&f.trailer, "trailer", 8, "trailer rows N_t")
	fs.IntVar(&f.requests, "requests", 64, "training requests")
	fs.IntVar(&f.docsMin, "docs-min", 2, "fewest documents per request")
	fs.IntVar(&f.docsMax, "docs-max", 3, "most documents per request")
	fs.IntVar(&f.docLen, "doc-len", 24, "tokens per document")
	fs.IntVar(&f.qLen, "question-len", 8, "tokens per question")
	fs.IntVar(&f.answer, "answer", 4, "greedy answer tokens the loss covers")
	fs.IntVar(&f.epochs, "epochs", 30, "epochs (0: store the initial adapter untrained)")
	fs.IntVar(&f.batch, "batch", 1, "examples per step")
	fs.IntVar(&f.workers, "workers", 1, "goroutines computing a batch's examples (the result does not depend on it)")
	fs.Float64Var(&f.lr, "lr", 5e-4, "peak learning rate, decayed linearly to 0")
	fs.Uint64Var(&f.seed, "seed", 1, "seed of the requests, the initialisation and the example order")
}

// check refuses bad values (errUsage); the model flags are checked when
// the model loads.
func (f *adapterFlags) check() error {
	switch {
	case f.init != "stats" && f.init != "token" && f.init != "text":
		return fmt.Errorf("%w: --init %q: want stats, token or text", errUsage, f.init)
	case (f.init == "text") != (f.initText != ""):
		return fmt.Errorf("%w: --init text and --init-text FILE go together", errUsage)
	case f.shape != "chunks" && f.shape != "needle":
		return fmt.Errorf("%w: --shape %q: want chunks or needle", errUsage, f.shape)
	case f.lossOn != "all" && f.lossOn != "value" && f.lossOn != "both":
		return fmt.Errorf("%w: --loss-on %q: want all, value or both", errUsage, f.lossOn)
	case f.lossOn != "all" && f.shape != "needle":
		return fmt.Errorf("%w: --loss-on %s needs --shape needle", errUsage, f.lossOn)
	case f.shape == "needle" && (f.data == "sampled" || f.docMin < 48 || f.docLen < f.docMin):
		return fmt.Errorf("%w: --shape needle needs --data DIR and 48 <= --doc-min <= --doc-len", errUsage)
	case f.requests < 1 || f.docsMin < 1 || f.docsMax < f.docsMin || f.docLen < 1 || f.qLen < 1 || f.answer < 1 || f.header < 0 || f.trailer < 0:
		return fmt.Errorf("%w: --requests, --docs-min, --doc-len, --question-len, --answer must be >= 1, --docs-max >= --docs-min, rows >= 0", errUsage)
	case f.epochs < 0 || f.batch < 1 || f.workers < 1 || !(f.lr > 0):
		return fmt.Errorf("%w: --epochs must be >= 0, --batch and --workers >= 1, --lr > 0", errUsage)
	}
	return nil
}

// options is the training options of f (without Init and Progress).
func (f *adapterFlags) options() train.Options {
	o := train.Options{Header: f.header, Trailer: f.trailer, Epochs: f.epochs, Batch: f.batch, Workers: f.workers, LR: f.lr, Seed: f.seed}
	for _, n := range []*int{&o.Header, &o.Trailer} {
		if *n == 0 {
			*n = -1 // none, not the default
		}
	}
	return o
}

// modelFlags name the model and the packets the adapter serves: their
// fingerprint is the one kvstore's adapter verbs compute from the same
// flags.
type modelFlags struct {
	path, dtype, weights string
}

func (m *modelFlags) define(fs *pflag.FlagSet) {
	fs.StringVar(&m.path, "model", "", "llama2.c checkpoint (required)")
	fs.StringVar(&m.dtype, "dtype", "f32", "dtype of the packets the adapter serves: f32, bf16 or f16")
	fs.StringVar(&m.weights, "weights-id", "", "weights id of the model spec (default llama2.c:<file name>:<size>)")
}

// load returns the model and the fingerprint of its packets.
func (m *modelFlags) load() (*llama.Model, format.Fingerprint, error) {
	var fp format.Fingerprint
	if m.path == "" {
		return nil, fp, fmt.Errorf("%w: --model is required", errUsage)
	}
	dt, err := format.ParseDType(m.dtype)
	if err != nil || !dt.Float() {
		return nil, fp, fmt.Errorf("%w: --dtype %q: want f32, bf16 or f16", errUsage, m.dtype)
	}
	model, err := llama.Load(m.path)
	if err != nil {
		return nil, fp, err
	}
	weights := m.weights
	if weights == "" {
		st, err := os.Stat(m.path)
		if err != nil {
			return nil, fp, err
		}
		weights = fmt.Sprintf("llama2.c:%s:%d", filepath.Base(m.path), st.Size())
	}
	return model, model.Spec(dt, weights).Fingerprint(), nil
}
