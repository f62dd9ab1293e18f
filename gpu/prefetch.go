package gpu

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/kvstore/kvstore/reconstruct"
)

// PrefetchOptions configure a Prefetcher. Zero fields take the defaults.
type PrefetchOptions struct {
	// Budget is the device memory, in bytes, for resident factor blocks
	// (one Arena of this size). Required.
	Budget int
	// Staging is the pinned host memory, in bytes, for transfers in
	// flight (default 64 MiB); it must hold the largest block rounded up
	// to a power of two, or that block is never loaded. At two blocks or
	// more, reading block i+1 from the Source overlaps the copy of block
	// i, and copies overlap the kernels that read earlier blocks (double
	// buffering).
	Staging int64
	// Readers is the number of concurrent Source reads (default 2).
	Readers int
}

// EnsureDefaults fills zero fields with defaults.
func (o *PrefetchOptions) EnsureDefaults() {
	if o.Staging == 0 {
		o.Staging = 64 << 20
	}
	if o.Readers == 0 {
		o.Readers = 2
	}
}

// Validate checks the options (after EnsureDefaults).
func (o *PrefetchOptions) Validate() error {
	if o.Budget <= 0 || o.Staging < minPoolClass || o.Readers < 1 {
		return fmt.Errorf("%w: prefetch options: budget %d, staging %d, readers %d", ErrInvalidArgument, o.Budget, o.Staging, o.Readers)
	}
	return nil
}

// Stats counts a Prefetcher's work since it was made.
type Stats struct {
	Hits       int64 // Acquire found the span resident or on its way
	Misses     int64 // Acquire had to load the span itself
	Loads      int64 // blocks copied to the device (prefetched or on demand)
	BytesMoved int64 // bytes copied host to device
	Evictions  int64 // resident blocks dropped to make room
	Skipped    int64 // prefetch requests that did not fit the budget
	Resident   int64 // blocks resident now
	// ResidentBytes is the device memory they hold (ArenaAlign-rounded).
	ResidentBytes int64
}

// Prefetcher keeps factor blocks resident on a device within a byte budget.
// Prefetch copies the requested spans in, highest routing score first,
// evicting the lowest-scored resident spans that nobody holds when room is
// needed (equal scores in SpanKey order: context, layer, head, span, kind); Acquire hands a resident span to a kernel (loading it on the spot
// when no prefetch did: a miss) and pins it until Release. Blocks travel
// Source -> pinned staging buffer (HostPool) -> device (Arena) on a copy
// stream of their own; each span's Ready event orders its readers after
// its copy, so copies overlap the kernels of spans already resident. A
// Prefetcher is safe for concurrent use.
type Prefetcher struct {
	dev   Device
	src   Source
	opts  PrefetchOptions
	arena *Arena
	pool  *HostPool
	copy  Stream

	recycle  chan staged
	recycled chan struct{}

	mu      sync.Mutex
	entries map[SpanKey]*entry
	events  []Event // free events
	stats   Stats
	loading sync.WaitGroup
	closed  bool
}

// entry is one span on the device or on its way.
type entry struct {
	key    SpanKey
	score  float32
	buf    Buffer
	layout reconstruct.FactorLayout
	ready  Event
	loaded chan struct{} // closed once the copy is enqueued or the load failed
	err    error         // why the load failed; read after loaded closes
	pins   int
	uses   map[Stream]Event // recorded by Release on readers' streams
}

// staged is a staging buffer to return once its copy is done.
type staged struct {
	h    HostBuffer
	done Event
}

// NewPrefetcher makes a prefetcher of src's blocks on dev.
func NewPrefetcher(dev Device, src Source, opts PrefetchOptions) (*Prefetcher, error) {
	opts.EnsureDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	p := &Prefetcher{dev: dev, src: src, opts: opts, entries: map[SpanKey]*entry{},
		recycle: make(chan staged, 64), recycled: make(chan struct{})}
	var err error
	if p.arena, err = NewArena(dev, opts.Budget); err != nil {
		return nil, fmt.Errorf("prefetcher: %w", err)
	}
	if p.pool, err = NewHostPool(dev, opts.Staging); err != nil {
		p.arena.Close()
		return nil, fmt.Errorf("prefetcher: %w", err)
	}
	if p.copy, err = dev.NewStream(); err != nil {
		p.arena.Close()
		p.pool.Close()
		return nil, fmt.Errorf("prefetcher: %w", err)
	}
	go p.recycler()
	return p, nil
}

// recycler returns staging buffers to the pool once their copies are done.
func (p *Prefetcher) recycler() {
	defer close(p.recycled)
	for s := range p.recycle {
		_ = s.done.Synchronize() // a copy error surfaces on the copy stream
		p.pool.Put(s.h)
		p.putEvent(s.done)
	}
}

// Arena is the device memory spans live in: the Factors buffer of a
// ReconstructLaunch is Arena().Base(), a span's offset Span.Offset().
func (p *Prefetcher) Arena() *Arena { return p.arena }

// Prefetch starts copying the requested spans to the device, highest score
// first (a span requested twice counts with its higher score), and returns
// once every copy it started has been enqueued, or ctx is done. A span
// already resident keeps its place and takes the new score. A span that
// fits only by evicting spans of equal or higher score, or spans in use,
// is skipped (Stats.Skipped). Source and copy errors are returned (the
// first one; the other spans are still tried); ctx's error once ctx ends.
func (p *Prefetcher) Prefetch(ctx context.Context, reqs []Request) error {
	queue := p.plan(reqs)
	var (
		mu    sync.Mutex
		next  int
		first error
		wg    sync.WaitGroup
	)
	take := func() (Request, bool) {
		mu.Lock()
		defer mu.Unlock()
		if next == len(queue) || ctx.Err() != nil {
			return Request{}, false
		}
		next++
		return queue[next-1], true
	}
	for range min(p.opts.Readers, len(queue)) {
		wg.Go(func() {
			for r, ok := take(); ok; r, ok = take() {
				_, err := p.load(ctx, r.Key, r.Score, false)
				switch {
				case errors.Is(err, ErrBudget):
					p.count(func(s *Stats) { s.Skipped++ })
				case err != nil && ctx.Err() == nil:
					mu.Lock()
					first = cmp.Or(first, err)
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("prefetch: %w", err)
	}
	return first
}

// plan sorts requests by descending score, merges duplicates and updates
// the scores of resident spans; it returns the spans still to load.
// Equal scores keep the order of reqs.
func (p *Prefetcher) plan(reqs []Request) []Request {
	at := make(map[SpanKey]int, len(reqs))
	merged := make([]Request, 0, len(reqs))
	for _, r := range reqs {
		if i, ok := at[r.Key]; ok {
			merged[i].Score = max(merged[i].Score, r.Score)
			continue
		}
		at[r.Key] = len(merged)
		merged = append(merged, r)
	}
	queue := merged[:0]
	p.mu.Lock()
	for _, r := range merged {
		if e, ok := p.entries[r.Key]; ok {
			e.score = r.Score
			continue
		}
		queue = append(queue, r)
	}
	p.mu.Unlock()
	slices.SortStableFunc(queue, func(a, b Request) int { return cmp.Compare(b.Score, a.Score) })
	return queue
}

func (p *Prefetcher) count(f func(*Stats)) {
	p.mu.Lock()
	f(&p.stats)
	p.mu.Unlock()
}

// Stats returns the counters.
func (p *Prefetcher) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.stats
	for _, e := range p.entries {
		if isClosed(e.loaded) {
			s.Resident++
			s.ResidentBytes += int64(alignUp(e.buf.Len(), ArenaAlign))
		}
	}
	return s
}

// Close waits for loads in flight, then frees the device memory, the
// staging buffers, the events and the copy stream. Spans must have been
// released and their readers finished.
func (p *Prefetcher) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	p.mu.Unlock()
	p.loading.Wait()
	close(p.recycle)
	<-p.recycled
	errs := []error{p.copy.Close()}
	p.mu.Lock()
	for _, e := range p.entries {
		p.events = append(p.events, e.ready)
		for _, ev := range e.uses {
			p.events = append(p.events, ev)
		}
	}
	p.entries = nil
	for _, ev := range p.events {
		errs = append(errs, ev.Close())
	}
	p.events = nil
	p.mu.Unlock()
	errs = append(errs, p.arena.Close(), p.pool.Close())
	return errors.Join(errs...)
}
