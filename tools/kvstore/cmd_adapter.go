package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"

	"github.com/kvstore/kvstore/adapter"
	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/format/safetensors"
	"github.com/kvstore/kvstore/lab/llama"
	"github.com/kvstore/kvstore/lab/train"
	"github.com/spf13/pflag"
)

func init() {
	register(&command{name: "adapter", summary: "train, import and export KV Packet adapters (train | import | export)", long: adapterSummary,
		sub: []*command{
			{name: "train", summary: "train an adapter on a llama2.c checkpoint and store it", long: adapterSummary, setup: setupAdapterTrain},
			{name: "import", args: "ADAPTER.safetensors", summary: "store an adapter read from a safetensors file", long: adapterSummary, setup: setupAdapterImport},
			{name: "export", args: "OUT.safetensors", summary: "write a stored adapter to a safetensors file", long: adapterSummary, setup: setupAdapterExport},
		}})
}

const adapterSummary = `KV Packet adapters: trained header and trailer soft tokens, stored in the
store as artifacts per (model fingerprint, adapter id); a packet naming an
adapter id is refused unless the store holds that adapter for its model.

  train   train an adapter on a llama2.c checkpoint by self-distillation
          (documents prefilled alone as [header; doc; trailer], the model
          reading everything at once as teacher, KL loss, AdamW with linear
          decay) and store it; a progress line goes to stderr
  import  store an adapter read from a safetensors file (tensors header,
          trailer; F32, BF16 or F16; the reference's format)
  export  write a stored adapter to a safetensors file

The model fingerprint is that of the packets: --model, --dtype and
--weights-id (default llama2.c:<file name>:<size>, as kvstore demo uses).`

// adapterModel is the model flags every adapter verb shares.
type adapterModel struct {
	path, dtype, weights string
}

func (a *adapterModel) flags(fs interface {
	StringVar(*string, string, string, string)
}) {
	fs.StringVar(&a.path, "model", "", "llama2.c checkpoint (required)")
	fs.StringVar(&a.dtype, "dtype", "f32", "dtype of the packets the adapter serves: f32, bf16 or f16")
	fs.StringVar(&a.weights, "weights-id", "", "weights id of the model spec (default llama2.c:<file name>:<size>)")
}

// load returns the model and the fingerprint of its packets.
func (a *adapterModel) load() (*llama.Model, format.Fingerprint, error) {
	var fp format.Fingerprint
	if a.path == "" {
		return nil, fp, fmt.Errorf("%w: --model is required", errUsage)
	}
	dt, err := format.ParseDType(a.dtype)
	if err != nil || !dt.Float() {
		return nil, fp, fmt.Errorf("%w: --dtype %q: want f32, bf16 or f16", errUsage, a.dtype)
	}
	m, err := llama.Load(a.path)
	if err != nil {
		return nil, fp, err
	}
	if a.weights == "" {
		st, err := os.Stat(a.path)
		if err != nil {
			return nil, fp, err
		}
		a.weights = fmt.Sprintf("llama2.c:%s:%d", filepath.Base(a.path), st.Size())
	}
	return m, m.Spec(dt, a.weights).Fingerprint(), nil
}

// adapterReport is what train and import print.
type adapterReport struct {
	ID          string    `json:"id"`
	Model       string    `json:"model_fingerprint"`
	Header      int       `json:"header_rows"`
	Trailer     int       `json:"trailer_rows"`
	Bytes       int       `json:"bytes"`
	EpochLoss   []float64 `json:"epoch_loss,omitempty"`
	TrainSecond float64   `json:"train_seconds,omitempty"`
}

func (e *env) printAdapter(r *adapterReport) error {
	if e.json {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	}
	fmt.Fprintf(e.stdout, "adapter    %s\nmodel      %s\nrows       %d header + %d trailer (%d bytes f32)\n", r.ID, r.Model, r.Header, r.Trailer, r.Bytes)
	if len(r.EpochLoss) > 0 {
		fmt.Fprintf(e.stdout, "loss       %.4f (first epoch) -> %.4f (last), %d epochs in %.1f s\n", r.EpochLoss[0], r.EpochLoss[len(r.EpochLoss)-1], len(r.EpochLoss), r.TrainSecond)
	}
	return nil
}

func setupAdapterTrain(fs *pflag.FlagSet, e *env) verbFunc {
	var mf adapterModel
	mf.flags(fs)
	var o train.Options
	var id, data, initFrom string
	var requests, docsMin, docsMax, docLen, qLen, answer int
	var seed uint64
	fs.StringVar(&id, "id", "", "adapter id (default: its content id, kvp-<hash>)")
	fs.StringVar(&data, "data", "sampled", "documents: 'sampled' (the model's own text) or a directory of .go files cut into bytes (byte-level models)")
	fs.StringVar(&initFrom, "init", "stats", "starting point: 'stats' (the reference's rows drawn from N(mean, std) of the embeddings, header and trailer visible) or 'token' (header rows BOS's embedding, hidden from the question; trailer rows the mean embedding)")
	fs.IntVar(&o.Header, "header", 8, "header rows N_h")
	fs.IntVar(&o.Trailer, "trailer", 8, "trailer rows N_t")
	fs.IntVar(&requests, "requests", 64, "training requests")
	fs.IntVar(&docsMin, "docs-min", 2, "fewest documents per request")
	fs.IntVar(&docsMax, "docs-max", 3, "most documents per request")
	fs.IntVar(&docLen, "doc-len", 24, "tokens per document")
	fs.IntVar(&qLen, "question-len", 8, "tokens per question")
	fs.IntVar(&answer, "answer", 4, "greedy answer tokens the loss covers")
	fs.IntVar(&o.Epochs, "epochs", 30, "epochs")
	fs.IntVar(&o.Batch, "batch", 1, "examples per step")
	fs.Float64Var(&o.LR, "lr", 5e-4, "peak learning rate, decayed linearly to 0")
	fs.Uint64Var(&seed, "seed", 1, "seed of the requests, the initialisation and the example order")
	return func(_ context.Context, e *env, args []string) error {
		switch {
		case len(args) > 0:
			return fmt.Errorf("%w: unexpected arguments %q", errUsage, args)
		case initFrom != "stats" && initFrom != "token":
			return fmt.Errorf("%w: --init %q: want stats or token", errUsage, initFrom)
		case requests < 1 || docsMin < 1 || docsMax < docsMin || docLen < 1 || qLen < 1 || answer < 1 || o.Header < 0 || o.Trailer < 0:
			return fmt.Errorf("%w: --requests, --docs-min, --doc-len, --question-len, --answer must be >= 1, --docs-max >= --docs-min, rows >= 0", errUsage)
		}
		o.Seed = seed
		for _, n := range []*int{&o.Header, &o.Trailer} {
			if *n == 0 {
				*n = -1 // none, not the default
			}
		}
		m, fp, err := mf.load()
		if err != nil {
			return err
		}
		if initFrom == "token" {
			// llama2.c checkpoints' BOS is token 1 (as kvstore demo uses).
			if o.Init, err = adapter.InitToken(m, max(o.Header, 0), max(o.Trailer, 0), 1); err != nil {
				return err
			}
		}
		db, err := openStore(e, true)
		if err != nil {
			return err
		}
		defer db.Close()
		var src train.Source = train.Sampled{Model: m, Skip: 4}
		if data != "sampled" {
			if src, err = train.LoadByteFiles(data, ".go", nil, 2*max(docLen, qLen)); err != nil {
				return err
			}
		}
		p := newProgress(e, "adapter train")
		p.stage(fmt.Sprintf("building %d requests (teacher: full recompute)", requests))
		reqs, err := train.Requests(src, rand.New(rand.NewPCG(seed, 1)), requests, docsMin, docsMax, docLen, qLen)
		if err != nil {
			p.done()
			return err
		}
		exs, err := train.Examples(m, reqs, answer)
		if err != nil {
			p.done()
			return err
		}
		var last time.Time
		o.Progress = func(g train.Progress) {
			if time.Since(last) >= progressEvery {
				last = time.Now()
				p.stage(fmt.Sprintf("step %d/%d, epoch %d, loss %.4f, %v", g.Step, g.Steps, g.Epoch+1, g.Loss, g.Elapsed.Round(time.Second)))
			}
		}
		res, err := train.Train(m, exs, o)
		p.done()
		if err != nil {
			return err
		}
		a := res.Adapter
		if id == "" {
			id = a.ID()
		}
		if err := adapter.Put(db, fp, id, a); err != nil {
			return err
		}
		return e.printAdapter(&adapterReport{ID: id, Model: fp.String(), Header: a.HeaderRows(), Trailer: a.TrailerRows(), Bytes: a.Bytes(),
			EpochLoss: res.EpochLoss, TrainSecond: res.Time.Seconds()})
	}
}

func setupAdapterImport(fs *pflag.FlagSet, e *env) verbFunc {
	var mf adapterModel
	mf.flags(fs)
	var id string
	fs.StringVar(&id, "id", "", "adapter id (default: its content id)")
	return func(_ context.Context, e *env, args []string) error {
		if len(args) != 1 {
			return fmt.Errorf("%w: adapter import takes one safetensors file", errUsage)
		}
		m, fp, err := mf.load()
		if err != nil {
			return err
		}
		a, err := adapter.ReadFile(args[0]) // refuses a file over the artifact limit unread
		if err != nil {
			return err
		}
		if a.Dim != m.Dim {
			return fmt.Errorf("%s: adapter rows are %d wide, the model's embeddings %d", args[0], a.Dim, m.Dim)
		}
		db, err := openStore(e, true)
		if err != nil {
			return err
		}
		defer db.Close()
		if id == "" {
			id = a.ID()
		}
		if err := adapter.Put(db, fp, id, a); err != nil {
			return err
		}
		return e.printAdapter(&adapterReport{ID: id, Model: fp.String(), Header: a.HeaderRows(), Trailer: a.TrailerRows(), Bytes: a.Bytes()})
	}
}

func setupAdapterExport(fs *pflag.FlagSet, e *env) verbFunc {
	var mf adapterModel
	mf.flags(fs)
	var id, dtype string
	fs.StringVar(&id, "id", "", "adapter id (required)")
	fs.StringVar(&dtype, "out-dtype", "f32", "tensor dtype of the file: f32 or bf16")
	return func(_ context.Context, e *env, args []string) error {
		if len(args) != 1 || id == "" {
			return fmt.Errorf("%w: adapter export takes --id and one output file", errUsage)
		}
		dt := map[string]safetensors.DType{"f32": safetensors.F32, "bf16": safetensors.BF16}[dtype]
		if dt == "" {
			return fmt.Errorf("%w: --out-dtype %q: want f32 or bf16", errUsage, dtype)
		}
		_, fp, err := mf.load()
		if err != nil {
			return err
		}
		db, err := openStore(e, false)
		if err != nil {
			return err
		}
		defer db.Close()
		a, err := adapter.Get(db, fp, id)
		if err != nil {
			return err
		}
		b, err := a.Encode(dt)
		if err != nil {
			return err
		}
		return os.WriteFile(args[0], b, 0o644)
	}
}
