package gpu

import (
	"context"
	"fmt"

	"github.com/kvstore/kvstore/reconstruct"
)

// Span is a factor block resident on the device, held by its acquirer.
type Span struct {
	Key    SpanKey
	Layout reconstruct.FactorLayout
	// Buffer is the encoding (descriptor, U, S, Vt) in the arena.
	Buffer Buffer
	// Ready completes when Buffer holds the block: enqueue Wait(Ready) on
	// a stream before work that reads it.
	Ready Event
	e     *entry
}

// Offset is the block's byte offset in Arena().Base(), the Job.Factors of
// a ReconstructLaunch whose Factors is the arena.
func (s *Span) Offset() int64 { return int64(s.Buffer.Offset()) }

// Acquire returns key's block on the device, held until Release. It is a
// hit when the block is resident or being prefetched, a miss when Acquire
// must load it itself, evicting the lowest-scored spans nobody holds; a
// span loaded so keeps the lowest score until a Prefetch scores it.
func (p *Prefetcher) Acquire(ctx context.Context, key SpanKey) (*Span, error) {
	p.mu.Lock()
	e, hit := p.entries[key]
	if hit {
		e.pins++
	}
	p.mu.Unlock()
	if !hit {
		var err error
		if e, err = p.load(ctx, key, 0, true); err != nil {
			return nil, err
		}
	}
	select {
	case <-e.loaded:
	case <-ctx.Done():
		p.unpin(e)
		return nil, fmt.Errorf("acquire %v: %w", key, ctx.Err())
	}
	if e.err != nil {
		p.unpin(e)
		return nil, e.err
	}
	p.count(func(s *Stats) {
		if hit {
			s.Hits++
		} else {
			s.Misses++
		}
	})
	return &Span{Key: key, Layout: e.layout, Buffer: e.buf, Ready: e.ready, e: e}, nil
}

// Release gives a span back. Its memory may be reused for another block
// once the work enqueued on after so far is done; pass nil when no device
// work reads the span any more. A span must be released once.
func (p *Prefetcher) Release(s *Span, after Stream) error {
	var ev Event
	if after != nil {
		var err error
		if ev, err = p.getEvent(); err != nil {
			return err
		}
		if err := after.Record(ev); err != nil {
			p.putEvent(ev)
			return fmt.Errorf("release %v: %w", s.Key, err)
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if ev != nil {
		if old, ok := s.e.uses[after]; ok {
			p.events = append(p.events, old) // superseded: later on the same stream
		}
		s.e.uses[after] = ev
	}
	s.e.pins--
	return nil
}

func (p *Prefetcher) unpin(e *entry) {
	p.mu.Lock()
	e.pins--
	p.mu.Unlock()
}
