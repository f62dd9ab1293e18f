package gpu

import (
	"context"
	"fmt"
	"math/bits"
	"sync"
)

// HostPool hands out host buffers for staging transfers (pinned on CUDA)
// within a byte limit. Allocating page-locked memory is slow (it maps and
// locks pages), so returned buffers are kept by size class (powers of two,
// 4 KiB and up) and reused; when a new class is needed and the limit is
// reached, cached buffers of other classes are freed first, and when every
// byte is in use Get waits for a Put. The limit therefore bounds the pinned
// memory the pool ever holds. A HostPool is safe for concurrent use.
type HostPool struct {
	dev   Device
	limit int64

	mu        sync.Mutex
	free      map[int][]HostBuffer // by class size
	allocated int64                // bytes held from the device (free + in use)
	inUse     int64
	changed   chan struct{} // closed and replaced whenever bytes come back
	closed    bool
}

// PoolStats describes a HostPool.
type PoolStats struct {
	Limit     int64 // the byte limit
	Allocated int64 // bytes held from the device, cached or in use
	InUse     int64 // bytes handed out and not yet returned
}

const minPoolClass = 4096

// NewHostPool makes a pool of at most limit bytes of dev's host memory.
func NewHostPool(dev Device, limit int64) (*HostPool, error) {
	if limit < minPoolClass {
		return nil, fmt.Errorf("%w: host pool limit %d below %d bytes", ErrInvalidArgument, limit, minPoolClass)
	}
	return &HostPool{dev: dev, limit: limit, free: map[int][]HostBuffer{}, changed: make(chan struct{})}, nil
}

// poolClass is the power of two (at least 4 KiB) that holds n bytes.
func poolClass(n int) int {
	if n <= minPoolClass {
		return minPoolClass
	}
	return 1 << bits.Len(uint(n-1))
}

// Get returns a buffer of n bytes, waiting while the pool's bytes are in
// use. It fails with ErrBudget when n alone exceeds the limit, with ctx's
// error when ctx ends first, with ErrClosed after Close. Return the buffer
// with Put once no stream uses it any more.
func (p *HostPool) Get(ctx context.Context, n int) (HostBuffer, error) {
	if n <= 0 {
		return HostBuffer{}, fmt.Errorf("%w: host pool: get of %d bytes", ErrInvalidArgument, n)
	}
	class := poolClass(n)
	if int64(class) > p.limit {
		return HostBuffer{}, fmt.Errorf("%w: host pool: %d bytes (class %d) exceed the %d-byte limit", ErrBudget, n, class, p.limit)
	}
	for {
		h, wait, err := p.tryGet(class)
		if err != nil {
			return HostBuffer{}, err
		}
		if wait == nil {
			h.b = h.b[:n]
			return h, nil
		}
		select {
		case <-ctx.Done():
			return HostBuffer{}, fmt.Errorf("host pool: waiting for %d bytes: %w", n, ctx.Err())
		case <-wait:
		}
	}
}

// tryGet takes a cached buffer or allocates one, or returns the channel to
// wait on.
func (p *HostPool) tryGet(class int) (HostBuffer, chan struct{}, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return HostBuffer{}, nil, fmt.Errorf("%w: host pool", ErrClosed)
	}
	if p.inUse+int64(class) > p.limit {
		return HostBuffer{}, p.changed, nil
	}
	if list := p.free[class]; len(list) > 0 {
		h := list[len(list)-1]
		p.free[class] = list[:len(list)-1]
		p.inUse += int64(class)
		return h, nil, nil
	}
	if err := p.trim(p.limit - int64(class)); err != nil {
		return HostBuffer{}, nil, err
	}
	h, err := p.dev.AllocHost(class)
	if err != nil {
		return HostBuffer{}, nil, fmt.Errorf("host pool: %w", err)
	}
	p.allocated += int64(class)
	p.inUse += int64(class)
	return h, nil, nil
}

// trim frees cached buffers until at most target bytes are held.
func (p *HostPool) trim(target int64) error {
	for class, list := range p.free {
		for len(list) > 0 && p.allocated > target {
			h := list[len(list)-1]
			list = list[:len(list)-1]
			if err := p.dev.FreeHost(h); err != nil {
				p.free[class] = list
				return fmt.Errorf("host pool: %w", err)
			}
			p.allocated -= int64(class)
		}
		p.free[class] = list
	}
	return nil
}

// Put returns a buffer from Get. Its memory must no longer be in use by
// any stream.
func (p *HostPool) Put(h HostBuffer) {
	h.b = h.b[:cap(h.b)]
	class := len(h.b)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.inUse -= int64(class)
	if p.closed {
		_ = p.dev.FreeHost(h)
		p.allocated -= int64(class)
	} else {
		p.free[class] = append(p.free[class], h)
	}
	close(p.changed)
	p.changed = make(chan struct{})
}

// Stats reports the pool's usage.
func (p *HostPool) Stats() PoolStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return PoolStats{Limit: p.limit, Allocated: p.allocated, InUse: p.inUse}
}

// Close frees the cached buffers; buffers still out are freed when they are
// Put back. Waiting and later Gets fail with ErrClosed.
func (p *HostPool) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	p.closed = true
	err := p.trim(0)
	close(p.changed)
	p.changed = make(chan struct{})
	return err
}
