package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/kvstore/kvstore/adapter"
	"github.com/kvstore/kvstore/format"
	"github.com/kvstore/kvstore/format/safetensors"
	"github.com/kvstore/kvstore/lab/llama"
	"github.com/spf13/pflag"
)

func init() {
	register(&command{name: "adapter", summary: "list, import and export KV Packet adapters (ls | import | export)", long: adapterSummary,
		sub: []*command{
			{name: "ls", summary: "list the stored adapters, of one model or of all", long: adapterSummary, setup: setupAdapterLs},
			{name: "import", args: "ADAPTER.safetensors", summary: "store an adapter read from a safetensors file", long: adapterSummary, setup: setupAdapterImport},
			{name: "export", args: "OUT.safetensors", summary: "write a stored adapter to a safetensors file", long: adapterSummary, setup: setupAdapterExport},
			{name: "train", summary: "moved: go run ./lab/cmd/kvtrain adapter", long: adapterTrainMoved, moved: adapterTrainer + " (the flags adapter train had)"},
		}})
}

const adapterSummary = `KV Packet adapters: trained header and trailer soft tokens, stored in the
store as artifacts per (model fingerprint, adapter id); a packet naming an
adapter id is refused unless the store holds that adapter for its model.

  ls      list the stored adapters: id, model fingerprint, header and
          trailer rows, stored bytes (--model or --fingerprint: one
          model's; default all)
  import  store an adapter read from a safetensors file (tensors header,
          trailer; F32, BF16 or F16; the reference's format)
  export  write a stored adapter to a safetensors file

Training is not an operation of this CLI: it is
go run ./lab/cmd/kvtrain adapter (the flags adapter train had), which
trains an adapter on a llama2.c checkpoint and stores it.

The model fingerprint is that of the packets: --model, --dtype and
--weights-id (default llama2.c:<file name>:<size>, as kvstore demo uses).`

// adapterTrainer is the command that trains adapters.
const adapterTrainer = "go run ./lab/cmd/kvtrain adapter"

const adapterTrainMoved = `Adapter training left the operations CLI: run
` + adapterTrainer + ` --dir STORE [--create] --model CKPT [flags]
(the flags adapter train had). This verb runs nothing and exits 2.`

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

// adapterReport is what import prints.
type adapterReport struct {
	ID      string `json:"id"`
	Model   string `json:"model_fingerprint"`
	Header  int    `json:"header_rows"`
	Trailer int    `json:"trailer_rows"`
	Bytes   int    `json:"bytes"`
}

func (e *env) printAdapter(r *adapterReport) error {
	if e.json {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	}
	_, err := fmt.Fprintf(e.stdout, "adapter    %s\nmodel      %s\nrows       %d header + %d trailer (%d bytes f32)\n", r.ID, r.Model, r.Header, r.Trailer, r.Bytes)
	return err
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
