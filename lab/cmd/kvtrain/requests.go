package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"

	"github.com/kvstore/kvstore/adapter"
	"github.com/kvstore/kvstore/lab/llama"
	"github.com/kvstore/kvstore/lab/quality"
	"github.com/kvstore/kvstore/lab/train"
)

// source is where f's documents and questions come from: the model's own
// sampled text, or byte cuts of the .go files under --data.
func (f *adapterFlags) source(m *llama.Model) (train.Source, error) {
	if f.data == "sampled" {
		return train.Sampled{Model: m, Skip: 4}, nil
	}
	return train.LoadByteFiles(f.data, ".go", f.keep(), 2*max(f.docLen, f.qLen))
}

// keep is the filter of --data's files: every .go file with --tests, else
// all but _test.go files.
func (f *adapterFlags) keep() func(string) bool {
	if f.tests {
		return nil
	}
	return train.NotTest
}

// examples draws f's training requests from src and has m, reading each
// whole, give the teacher's answers; both stop once ctx is done.
func (f *adapterFlags) examples(ctx context.Context, m *llama.Model, src train.Source, p *progress) ([]*llama.PacketExample, error) {
	if f.shape == "needle" {
		return f.needleExamples(ctx, m, p)
	}
	p.stage(fmt.Sprintf("drawing %d requests", f.requests))
	reqs, err := train.Requests(ctx, src, rand.New(rand.NewPCG(f.seed, 1)), f.requests, f.docsMin, f.docsMax, f.docLen, f.qLen)
	if err != nil {
		return nil, err
	}
	p.stage(fmt.Sprintf("%d teacher answers of %d tokens (full recompute)", f.requests, f.answer))
	return train.Examples(ctx, m, reqs, f.answer)
}

// needleExamples draws f's requests as lab/quality's multi-document
// needles from --data's files and has m, reading each whole, give the
// teacher's distribution after every token of the question and the value.
func (f *adapterFlags) needleExamples(ctx context.Context, m *llama.Model, p *progress) ([]*llama.PacketExample, error) {
	files, err := train.SourceFiles(f.data, ".go", f.keep(), 2*f.docLen)
	if err != nil {
		return nil, err
	}
	rand.New(rand.NewPCG(f.seed, 0x66696c65)).Shuffle(len(files), func(i, j int) { files[i], files[j] = files[j], files[i] })
	p.stage(fmt.Sprintf("drawing %d needle requests from %d files", f.requests, len(files)))
	reqs, err := quality.MultiDocRequests(files, quality.MultiDocSpec{Requests: f.requests, DocsMin: f.docsMin, DocsMax: f.docsMax,
		DocMin: f.docMin, DocMax: f.docLen, Limit: m.SeqLen, Seed: f.seed})
	if err != nil {
		return nil, err
	}
	p.stage(fmt.Sprintf("%d teacher distributions over the question and value (full recompute)", f.requests))
	var out []*llama.PacketExample
	for i, r := range reqs {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("stopped before the example of request %d of %d: %w", i+1, len(reqs), err)
		}
		ex, err := train.ForcedExample(m, []int{train.BOS}, r.Docs, r.Continuation())
		if err != nil {
			return nil, fmt.Errorf("request %d: %w", i, err)
		}
		if f.lossOn != "value" {
			out = append(out, ex)
		}
		if f.lossOn != "all" {
			out = append(out, valueOnly(ex, len(r.Value)))
		}
	}
	return out, nil
}

// valueOnly is ex with its loss on the last n+1 positions of its
// continuation only: those after the question's last token and after each
// of the value's n bytes, which predict the value and its closing quote.
func valueOnly(ex *llama.PacketExample, n int) *llama.PacketExample {
	v := *ex
	v.Teacher = ex.Teacher[len(ex.Teacher)-min(n+1, len(ex.Teacher)):]
	return &v
}

// initial is the adapter training starts from: nil for --init stats
// (train.Train draws it), a hidden BOS header for --init token.
func (f *adapterFlags) initial(m *llama.Model) (*adapter.Adapter, error) {
	if f.initFile != "" {
		a, err := adapter.ReadFile(f.initFile)
		if err == nil && a.Dim != m.Dim {
			err = fmt.Errorf("%w: --init-file %s: %d wide, the model is %d", errUsage, f.initFile, a.Dim, m.Dim)
		}
		return a, err
	}
	switch f.init {
	case "text":
		b, err := os.ReadFile(f.initText)
		if err != nil {
			return nil, fmt.Errorf("%w: --init-text: %w", errUsage, err)
		}
		text := make([]int, len(b))
		for i, c := range b {
			text[i] = int(c)
		}
		a, err := adapter.InitText(m, text, f.trailer)
		if err != nil {
			return nil, fmt.Errorf("--init-text %s: %w", f.initText, err)
		}
		return a, nil
	case "token":
	default:
		if f.epochs > 0 {
			return nil, nil // train.Train draws the reference's rows
		}
		return adapter.Init(m, f.header, f.trailer, f.seed)
	}
	if f.initToken < 0 || f.initToken >= m.Vocab {
		return nil, fmt.Errorf("%w: --init-token %d outside the vocabulary [0, %d)", errUsage, f.initToken, m.Vocab)
	}
	return adapter.InitToken(m, f.header, f.trailer, f.initToken)
}
