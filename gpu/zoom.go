package gpu

import (
	"context"
	"errors"
)

// Target is one span to rebuild into the destination layout.
type Target struct {
	Key   SpanKey
	Score float32 // routing score, for the prefetch order (Zoom)
	Head  int     // destination head
	Token int     // destination (logical) token of the span's row 0
	// Rotate applies RoPE (RoPE.Apply, keys) at Positions; values leave it
	// false.
	Rotate bool
	// Positions are the model positions of the span's rows; nil means
	// Token, Token+1, ...
	Positions []int64
	// Gates are the rank gates m_i, one per component, or nil for ones.
	Gates []float32
}

// Zoom rebuilds targets from the prefetcher's spans into out: it prefetches
// them in score order in the background, acquires them batch by batch in
// the order given (each Acquire waits only for its own span's load), runs
// each batch, and releases the spans after it on the stream. It returns
// once everything is enqueued; synchronize the stream before reading out.
// The prefetcher's budget must hold one batch (BatchJobs spans, pinned while
// they run) plus the spans its readers may be loading at the same time
// (PrefetchOptions.Readers; a span being loaded cannot be evicted), each
// counted at the largest span's size: with less, Zoom can fail with
// ErrBudget ("holds only spans in use") depending on timing.
func (r *Reconstructor) Zoom(ctx context.Context, pf *Prefetcher, out Output, targets []Target) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	reqs := make([]Request, len(targets))
	for i, t := range targets {
		reqs[i] = Request{Key: t.Key, Score: t.Score}
	}
	prefetched := make(chan error, 1)
	go func() { prefetched <- pf.Prefetch(ctx, reqs) }()
	err := r.zoomBatches(ctx, pf, out, targets)
	cancel()
	if perr := <-prefetched; err == nil && perr != nil && !errors.Is(perr, context.Canceled) {
		err = perr
	}
	return err
}

func (r *Reconstructor) zoomBatches(ctx context.Context, pf *Prefetcher, out Output, targets []Target) error {
	for start := 0; start < len(targets); start += r.opts.BatchJobs {
		batch := targets[start:min(start+r.opts.BatchJobs, len(targets))]
		spans := make([]*Span, 0, len(batch))
		var err error
		for _, t := range batch {
			var s *Span
			if s, err = pf.Acquire(ctx, t.Key); err != nil {
				break
			}
			spans = append(spans, s)
		}
		if err == nil {
			err = r.batch(pf.Arena().Base(), out, batch, spans)
		}
		if err == nil && r.afterBatch != nil {
			r.afterBatch()
		}
		for _, s := range spans {
			err = errors.Join(err, pf.Release(s, r.stream))
		}
		if err != nil {
			return err
		}
	}
	return nil
}
