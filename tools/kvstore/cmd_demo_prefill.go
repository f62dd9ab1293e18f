package main

import (
	"context"
	"fmt"

	"github.com/kvstore/kvstore/lab/llama"
)

// prefillChunk is the most tokens demo prefills between two looks at its
// context and redraws of its progress line: a 4096-token document takes
// tens of seconds on the reference model, and Ctrl-C must not wait for it.
const prefillChunk = 64

// prefiller runs demo's prefills: m over tokens prefillChunk at a time,
// stopping once ctx is done and showing "what: done/total tokens" on p.
type prefiller struct {
	ctx  context.Context
	m    *llama.Model
	p    *progress
	what string
}

// prefill runs the tokens from position pos after cache (nil: a new one)
// and returns the last token's logits and the cache. lab/llama computes
// every row on its own, so the result is bit for bit one Forward over all
// the tokens (TestDemoPrefillChunks).
func (f prefiller) prefill(tokens []int, pos int64, cache *llama.Cache) (*llama.Result, error) {
	var res *llama.Result
	for done := 0; done < len(tokens); done += prefillChunk {
		if err := f.ctx.Err(); err != nil {
			return nil, fmt.Errorf("%s: stopped at token %d of %d: %w", f.what, done, len(tokens), err)
		}
		if len(tokens) > prefillChunk {
			f.p.stage(fmt.Sprintf("%s: %d/%d tokens", f.what, done, len(tokens)))
		}
		chunk := tokens[done:min(done+prefillChunk, len(tokens))]
		var err error
		if res, err = f.m.Forward(chunk, pos+int64(done), cache, llama.ForwardOptions{LastOnly: true}); err != nil {
			return nil, err
		}
		cache = res.Cache
	}
	if res == nil {
		return f.m.Forward(tokens, pos, cache, llama.ForwardOptions{LastOnly: true}) // no tokens: Forward's error
	}
	return res, nil
}
