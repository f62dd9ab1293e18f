package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/kvstore/kvstore/adapter"
	"github.com/kvstore/kvstore/format/safetensors"

	"github.com/kvstore/kvstore/lab/llama"
	"github.com/kvstore/kvstore/lab/train"
	"github.com/spf13/cobra"
)

const adapterLong = `Trains a KV Packet adapter on a llama2.c checkpoint by self-distillation
and stores it: each training request's documents are prefilled alone as
[header; doc; trailer], the model reading the whole request at once is
the teacher, the loss is KL(teacher || student) over --answer greedy
tokens, minimised by AdamW with linear decay. The base model is frozen.

The adapter is stored for the model fingerprint of the packets it serves:
--model, --dtype and --weights-id (default llama2.c:<file name>:<size>,
as kvstore demo and kvstore adapter import/export/ls use). A progress
line goes to stderr. The first SIGINT or SIGTERM stops training before
its next step; nothing is stored (exit 130).`

// adapterCommand is the adapter verb; *ran is set when its body runs.
func adapterCommand(e *env, ran *bool) *cobra.Command {
	var f adapterFlags
	return verb("adapter --dir STORE [--create] --model CKPT", "train a KV Packet adapter on a llama2.c checkpoint and store it",
		adapterLong, &f, ran, func(ctx context.Context) error { return runAdapter(ctx, e, &f) })
}

// runAdapter trains the adapter f asks for and stores it.
func runAdapter(ctx context.Context, e *env, f *adapterFlags) error {
	m, fp, db, err := begin(e, f.check, &f.model)
	if err != nil {
		return err
	}
	defer db.Close()
	p := newProgress(e.stderr, "kvtrain adapter")
	res, err := trainAdapter(ctx, m, f, p)
	p.done()
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("trained, not stored: %w", err)
	}
	a := res.Adapter
	id, err := storeAdapter(db, fp, f.id, a)
	if err != nil {
		return err
	}
	if err := db.Close(); err != nil {
		return err
	}
	r := &report{ID: id, Model: fp.String(), Header: a.HeaderRows(), Trailer: a.TrailerRows(), Bytes: a.Bytes(),
		EpochLoss: res.EpochLoss, TrainSecond: res.Time.Seconds()}
	return r.write(e.stdout, e.json)
}

// trainAdapter builds f's examples on m and trains the adapter, showing
// each stage and step on p; it stops once ctx is done.
func trainAdapter(ctx context.Context, m *llama.Model, f *adapterFlags, p *progress) (*train.Result, error) {
	src, err := f.source(m)
	if err != nil {
		return nil, err
	}
	o := f.options()
	if o.Init, err = f.initial(m); err != nil {
		return nil, err
	}
	if f.epochs == 0 && !f.baseline {
		return &train.Result{Adapter: o.Init}, nil
	}
	exs, err := f.examples(ctx, m, src, p)
	if err != nil {
		return nil, err
	}
	if f.baseline {
		if err := baseline(m, o.Init, exs, p); err != nil {
			return nil, err
		}
	}
	if f.epochs == 0 {
		return &train.Result{Adapter: o.Init}, nil
	}
	p.stage(fmt.Sprintf("training on %d examples", len(exs)))
	o.Progress = func(g train.Progress) {
		p.step(fmt.Sprintf("step %d/%d, epoch %d, loss %.4f, %v", g.Step, g.Steps, g.Epoch+1, g.Loss, g.Elapsed.Round(time.Second)))
	}
	if f.epochDir != "" {
		o.Epoch = func(e train.EpochEnd) error {
			return saveEpoch(f.epochDir, e)
		}
	}
	return train.Train(ctx, m, exs, o)
}

// saveEpoch writes e's adapter to dir/epoch-N.safetensors (F32), durably
// enough to resume from: a temporary file renamed into place.
func saveEpoch(dir string, e train.EpochEnd) error {
	b, err := e.Adapter.Encode(safetensors.F32)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	p := filepath.Join(dir, fmt.Sprintf("epoch-%d.safetensors", e.Epoch+1))
	if err := os.WriteFile(p+".tmp", b, 0o644); err != nil {
		return err
	}
	return os.Rename(p+".tmp", p)
}

// baseline shows the loss of exs with no adapter and with init (nil: none
// given, the reference's initialisation is drawn inside train.Train).
func baseline(m *llama.Model, init *adapter.Adapter, exs []*llama.PacketExample, p *progress) error {
	none, err := train.Loss(m, nil, exs)
	if err != nil {
		return err
	}
	msg := fmt.Sprintf("baseline: loss %.4f with no adapter", none)
	if init != nil {
		l, err := train.Loss(m, init, exs)
		if err != nil {
			return err
		}
		msg += fmt.Sprintf(", %.4f with the initial adapter", l)
	}
	p.stage(msg)
	return nil
}
