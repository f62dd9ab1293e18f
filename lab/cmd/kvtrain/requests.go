package main

import (
	"context"
	"fmt"
	"math/rand/v2"

	"github.com/kvstore/kvstore/adapter"
	"github.com/kvstore/kvstore/lab/llama"
	"github.com/kvstore/kvstore/lab/train"
)

// source is where f's documents and questions come from: the model's own
// sampled text, or byte cuts of the .go files under --data.
func (f *adapterFlags) source(m *llama.Model) (train.Source, error) {
	if f.data == "sampled" {
		return train.Sampled{Model: m, Skip: 4}, nil
	}
	return train.LoadByteFiles(f.data, ".go", nil, 2*max(f.docLen, f.qLen))
}

// examples draws f's training requests from src and has m, reading each
// whole, give the teacher's answers; both stop once ctx is done.
func (f *adapterFlags) examples(ctx context.Context, m *llama.Model, src train.Source, p *progress) ([]*llama.PacketExample, error) {
	p.stage(fmt.Sprintf("drawing %d requests", f.requests))
	reqs, err := train.Requests(ctx, src, rand.New(rand.NewPCG(f.seed, 1)), f.requests, f.docsMin, f.docsMax, f.docLen, f.qLen)
	if err != nil {
		return nil, err
	}
	p.stage(fmt.Sprintf("%d teacher answers of %d tokens (full recompute)", f.requests, f.answer))
	return train.Examples(ctx, m, reqs, f.answer)
}

// initial is the adapter training starts from: nil for --init stats
// (train.Train draws it), a hidden BOS header for --init token.
func (f *adapterFlags) initial(m *llama.Model) (*adapter.Adapter, error) {
	if f.init != "token" {
		return nil, nil
	}
	return adapter.InitToken(m, f.header, f.trailer, train.BOS)
}
