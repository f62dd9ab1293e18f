package gpu

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/kvstore/kvstore/reconstruct"
)

// demandScore is the score of a span loaded by Acquire without a request:
// it may evict any idle span, and is the first to go itself once released
// unless a later Prefetch scores it.
var demandScore = float32(math.Inf(-1))

// load brings key to the device (or finds it on its way) and returns its
// entry. A prefetch load spares spans of score >= score; a demand load
// (Acquire) spares only spans in use, pins the entry and scores it
// demandScore.
func (p *Prefetcher) load(ctx context.Context, key SpanKey, score float32, demand bool) (*entry, error) {
	size, err := p.src.SpanSize(key)
	if err != nil {
		return nil, fmt.Errorf("prefetch %v: size: %w", key, err)
	}
	if size < reconstruct.FactorHeaderSize {
		return nil, fmt.Errorf("%w: %v: %d bytes", ErrCorruption, key, size)
	}
	var (
		e     *entry
		fresh bool
	)
	for {
		var wait chan struct{}
		e, fresh, wait, err = p.reserve(key, size, score, demand)
		if wait == nil {
			break
		}
		select { // a demand load waits for loads in flight to become evictable
		case <-wait:
		case <-ctx.Done():
			return nil, fmt.Errorf("acquire %v: %w", key, ctx.Err())
		}
	}
	if err != nil || !fresh {
		return e, err
	}
	defer p.loading.Done()
	err = p.fill(ctx, e, size)
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil {
		e.err = err
		delete(p.entries, key)
		_ = p.arena.Free(e.buf)
		p.events = append(p.events, e.ready)
	} else {
		p.stats.Loads++
		p.stats.BytesMoved += int64(size)
	}
	close(e.loaded)
	return e, err
}

// reserve finds or creates key's entry, pinned for a demand load; a new one
// gets size bytes of arena, evicting idle spans as load describes. When a
// demand load finds no room but other loads are in flight, it returns one
// of their channels to wait on before trying again.
func (p *Prefetcher) reserve(key SpanKey, size int, score float32, demand bool) (e *entry, fresh bool, wait chan struct{}, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, false, nil, fmt.Errorf("%w: prefetcher", ErrClosed)
	}
	if e, ok := p.entries[key]; ok {
		if demand {
			e.pins++
		}
		return e, false, nil, nil
	}
	above := score
	if demand {
		score, above = demandScore, float32(math.Inf(1))
	}
	buf, err := p.makeRoom(size, above)
	if errors.Is(err, ErrBudget) && demand {
		for _, o := range p.entries {
			if !isClosed(o.loaded) {
				return nil, false, o.loaded, nil
			}
		}
	}
	if err != nil {
		return nil, false, nil, fmt.Errorf("prefetch %v: %w", key, err)
	}
	ready, err := p.getEventLocked()
	if err != nil {
		_ = p.arena.Free(buf)
		return nil, false, nil, err
	}
	e = &entry{key: key, score: score, buf: buf, ready: ready, loaded: make(chan struct{}), uses: map[Stream]Event{}}
	if demand {
		e.pins = 1
	}
	p.entries[key] = e
	p.loading.Add(1)
	return e, true, nil, nil
}

// makeRoom allocates size bytes, evicting idle spans scored below score
// (all idle spans when score is +Inf), lowest first; equal scores go in
// SpanKey order (compareKeys), so that the victims do not depend on the
// map's iteration order. Called with p.mu held.
func (p *Prefetcher) makeRoom(size int, score float32) (Buffer, error) {
	for {
		buf, err := p.arena.Alloc(size)
		if !errors.Is(err, ErrBudget) {
			return buf, err
		}
		var victim *entry
		for _, e := range p.entries {
			if e.pins == 0 && (e.score < score || math.IsInf(float64(score), 1)) && isClosed(e.loaded) && e.err == nil &&
				(victim == nil || e.score < victim.score || e.score == victim.score && compareKeys(e.key, victim.key) < 0) {
				victim = e
			}
		}
		if victim == nil {
			return Buffer{}, fmt.Errorf("%w: %d bytes: the budget of %d holds only spans in use or scored >= %v",
				ErrBudget, size, p.arena.Size(), score)
		}
		if err := p.evict(victim); err != nil {
			return Buffer{}, err
		}
	}
}

// evict drops a resident span. The copy stream waits for the span's
// readers before it may write the memory again. Called with p.mu held.
func (p *Prefetcher) evict(e *entry) error {
	for s, ev := range e.uses {
		if err := p.copy.Wait(ev); err != nil {
			return fmt.Errorf("evict %v: %w", e.key, err)
		}
		p.events = append(p.events, ev)
		delete(e.uses, s)
	}
	if err := p.arena.Free(e.buf); err != nil {
		return err
	}
	p.events = append(p.events, e.ready)
	delete(p.entries, e.key)
	p.stats.Evictions++
	return nil
}

// fill reads the block into staging memory, checks its descriptor and
// enqueues its copy.
func (p *Prefetcher) fill(ctx context.Context, e *entry, size int) error {
	h, err := p.pool.Get(ctx, size)
	if err != nil {
		return fmt.Errorf("prefetch %v: staging: %w", e.key, err)
	}
	if err := p.src.ReadSpan(ctx, e.key, h.Bytes()); err != nil {
		p.pool.Put(h)
		return fmt.Errorf("prefetch %v: read: %w", e.key, err)
	}
	if e.layout, err = reconstruct.ParseFactorLayout(h.Bytes()); err != nil {
		p.pool.Put(h)
		return fmt.Errorf("%w: %v: %w", ErrCorruption, e.key, err)
	}
	done, err := p.getEvent()
	if err == nil {
		err = p.copy.CopyHtoD(e.buf, h.Bytes())
	}
	if err == nil {
		err = p.copy.Record(e.ready)
	}
	if err == nil {
		err = p.copy.Record(done)
	}
	if err != nil {
		// Whatever was enqueued ends before later copies into this memory.
		if syncErr := p.copy.Synchronize(); syncErr != nil {
			err = errors.Join(err, syncErr)
		}
		p.pool.Put(h)
		if done != nil {
			p.putEvent(done)
		}
		return fmt.Errorf("prefetch %v: copy: %w", e.key, err)
	}
	p.recycle <- staged{h: h, done: done}
	return nil
}

func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

func (p *Prefetcher) getEvent() (Event, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.getEventLocked()
}

func (p *Prefetcher) getEventLocked() (Event, error) {
	if n := len(p.events); n > 0 {
		ev := p.events[n-1]
		p.events = p.events[:n-1]
		return ev, nil
	}
	ev, err := p.dev.NewEvent()
	if err != nil {
		return nil, fmt.Errorf("prefetcher: %w", err)
	}
	return ev, nil
}

func (p *Prefetcher) putEvent(ev Event) {
	p.mu.Lock()
	p.events = append(p.events, ev)
	p.mu.Unlock()
}
